package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestStatusWithoutRefusalsAccess: a user whose ACL covers the providers'
// keys but not the refusals' record still gets the status, which says
// why it shows no refusals.
func TestStatusWithoutRefusalsAccess(t *testing.T) {
	t.Parallel()
	f := startFixture(t)
	f.reserve(t, "https://api.acme.test/x", "")
	ctx := context.Background()
	// Every key of the prefix but those whose tag starts with "!".
	if err := f.client.Do(ctx, "ACL", "SETUSER", "reader", "on", ">pw", "+@all", "resetkeys", "~"+f.prefix+"{[^!]*").Err(); err != nil {
		t.Fatal(err)
	}
	reader := strings.Replace(f.url, "redis://", "redis://reader:pw@", 1)
	args := []string{"status", "--redis", reader, "--config", validFile, "--prefix", f.prefix}
	var v view
	out := mustCLI(t, append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if r := findRow(t, v, "acme", "daily", ""); r.Used != 1 {
		t.Errorf("acme daily read by the reader: %+v", r)
	}
	if !strings.Contains(v.RefusalsError, "NOPERM") || len(v.Refusals) != 0 {
		t.Errorf("refusals %+v, error %q; want none, and the NOPERM that stopped them", v.Refusals, v.RefusalsError)
	}
	table := mustCLI(t, args...)
	if !strings.Contains(table, "Recent refusals could not be read: ") {
		t.Errorf("the table does not say why it lists no refusals:\n%s", table)
	}
}
