package quota_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fleetquota/throttle/quota"
)

func TestSafePart(t *testing.T) {
	t.Parallel()
	keep := []string{"acct_1", "store-9.myshopify.com", "a@b+c=d/e", strings.Repeat("x", 64)}
	for _, s := range keep {
		if got := quota.SafePart(s); got != s {
			t.Errorf("SafePart(%q) = %q, want it unchanged", s, got)
		}
	}
	hostile := []string{"", "{tag}", "a:b", "a\nb", "a b", "\xff\xfe", "ünï", strings.Repeat("x", 65), strings.Repeat("{", 10000)}
	seen := map[string]string{}
	for _, s := range hostile {
		got := quota.SafePart(s)
		if !strings.HasPrefix(got, "#") || len(got) != 33 {
			t.Errorf("SafePart(%q) = %q, want # and 32 hex digits", s, got)
		}
		if strings.ContainsAny(got, "{}:\n ") {
			t.Errorf("SafePart(%q) = %q holds a character that could break a key", s, got)
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("SafePart(%q) = SafePart(%q) = %q", s, prev, got)
		}
		seen[got] = s
	}
}

func TestKeyOfDistinct(t *testing.T) {
	t.Parallel()
	// A scope that tries to look like another limit's key must not collide.
	pairs := [][2]string{{"a", "b:c"}, {"a:b", "c"}, {"a", ""}, {"a", "#"}, {"a", "{x}"}}
	seen := map[string]bool{}
	for _, p := range pairs {
		k := quota.KeyOf(p[0], p[1])
		if seen[k] {
			t.Errorf("KeyOf(%q, %q) = %q collides", p[0], p[1], k)
		}
		seen[k] = true
	}
	for i := 0; i < 10000; i++ {
		k := quota.KeyOf("per-tenant", fmt.Sprintf("tenant\n%d", i))
		if seen[k] || len(k) > 100 {
			t.Fatalf("KeyOf for tenant %d = %q: collides or is unbounded", i, k)
		}
		seen[k] = true
	}
}

func TestSafeKey(t *testing.T) {
	t.Parallel()
	hashed := quota.SafePart("a tenant{with}braces")
	if !quota.IsHash(hashed) || quota.IsHash("acct_1") || quota.IsHash("#"+strings.Repeat("G", 32)) {
		t.Errorf("IsHash: a SafePart hash must be one, a kept value and upper-case hex must not")
	}
	keep := []string{"shopify", "shopify:store-9.example.com", "stripe:" + hashed, "github:acme"}
	for _, tag := range keep {
		if got := quota.SafeKey(tag); got != tag {
			t.Errorf("SafeKey(%q) = %q, want it unchanged (readable in Redis)", tag, got)
		}
	}
	bad := []string{"", "{a}", "a:{b}", "a::b", "a:", ":a", "a:b c", "a\nb", "#nothex:x", strings.Repeat("x", 200), "a:" + strings.Repeat("y", 65)}
	for _, tag := range bad {
		got := quota.SafeKey(tag)
		if got != quota.SafePart(tag) || strings.ContainsAny(got, "{}\n :") {
			t.Errorf("SafeKey(%q) = %q, want SafePart's hash", tag, got)
		}
	}
}
