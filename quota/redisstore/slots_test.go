package redisstore

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/fleetquota/throttle/internal/redistest"
)

// TestSlotAgreesWithCluster: slot computes what a real Redis Cluster's
// CLUSTER KEYSLOT says, for random tags of every length and byte, tags as
// the store writes them, and whole keys with their hash tag.
func TestSlotAgreesWithCluster(t *testing.T) {
	t.Parallel()
	client := redistest.StartCluster(t).Client(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	tags := []string{"github", "github:acme", "stripe:#5caa0c1f6b7d8e9f00112233445566ff", "123456789", "a", "{"}
	for range 500 {
		b := make([]byte, 1+rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		// A tag the store writes holds no brace (quota.SafeKey).
		tags = append(tags, strings.NewReplacer("{", "(", "}", ")").Replace(string(b)))
	}
	pipe := client.Pipeline()
	want := make([]func() (int64, error), len(tags))
	for i, tag := range tags {
		want[i] = pipe.ClusterKeySlot(ctx, "throttle:{"+tag+"}:!pause:pause:all").Result
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for i, tag := range tags {
		w, err := want[i]()
		if err != nil {
			t.Fatal(err)
		}
		if got := slot(tag); int64(got) != w {
			t.Errorf("slot(%q) = %d, CLUSTER KEYSLOT says %d", tag, got, w)
		}
	}
}

// TestFillers: every slot has a filler of at most four base-36
// characters that hashes to it. It logs the time the table takes.
func TestFillers(t *testing.T) {
	t.Parallel()
	began := time.Now()
	ft := fillers()
	t.Logf("filler table: %v, %d bytes of fillers", time.Since(began), len(ft.all))
	for s := range slots {
		f := ft.filler(s)
		if f == "" || len(f) > 4 || strings.Trim(f, "0123456789abcdefghijklmnopqrstuvwxyz") != "" {
			t.Fatalf("filler of slot %d is %q", s, f)
		}
		if got := slot(f); got != s {
			t.Fatalf("filler %q of slot %d hashes to %d", f, s, got)
		}
	}
}
