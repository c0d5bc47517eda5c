package config

import (
	"bytes"
	"testing"
)

func TestProviders(t *testing.T) {
	t.Parallel()
	a := Providers()
	if !bytes.Contains(a, []byte("providers:")) {
		t.Fatal("the embedded catalog has no providers section")
	}
	a[0] ^= 0xff
	if b := Providers(); bytes.Equal(a, b) {
		t.Error("Providers returned shared bytes")
	}
}
