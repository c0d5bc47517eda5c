package backoff

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestRateLimitDelay(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name          string
		field, policy string
		want          time.Duration
		ok            bool
	}{
		{"draft -10 exhausted", `"default";r=0;t=30`, "", 30 * time.Second, true},
		{"token name", `default;r=0;t=30`, "", 30 * time.Second, true},
		{"remaining but throttled: earliest reset", `"default";r=50;t=30`, "", 30 * time.Second, true},
		{"two policies, one exhausted", `"burst";r=0;t=5, "daily";r=100;t=3000`, "", 5 * time.Second, true},
		{"two exhausted: the later", `"burst";r=0;t=5,"daily";r=0;t=3000`, "", 3000 * time.Second, true},
		{"none exhausted: the earliest", `"burst";r=3;t=50, "daily";r=100;t=20`, "", 20 * time.Second, true},
		{"missing t from the policy window", `"burst";r=0`, `"burst";q=100;w=60,"daily";q=1000;w=86400`, time.Minute, true},
		{"missing t, no policy", `"burst";r=0`, "", 0, false},
		{"malformed policy ignored", `"burst";r=0`, `"burst";q=100;w=`, 0, false},
		{"extra params", `"default";r=0;t=10;pk=:cHJvamVjdDEyMw==:`, "", 10 * time.Second, true},
		{"tab after comma", "\"a\";r=0;t=7,\t\"b\";r=1;t=9", "", 7 * time.Second, true},
		{"zero reset", `"default";r=0;t=0`, "", 0, false},
		{"older draft dictionary", `limit=100, remaining=0, reset=30`, "", 30 * time.Second, true},
		{"older draft, no reset", `limit=100, remaining=0`, "", 0, false},
		{"malformed: unterminated string", `"default;r=0;t=30`, "", 0, false},
		{"malformed: trailing comma", `"default";r=0;t=30,`, "", 0, false},
		{"malformed: bad param key", `"default";R=0;t=30`, "", 0, false},
		{"malformed: negative t", `"default";r=0;t=-30`, "", 0, false},
		{"malformed: decimal t", `"default";r=0;t=1.5`, "", 0, false},
		{"malformed: inner list", `("a" "b");r=0;t=3`, "", 0, false},
		{"malformed: garbage", `!!!`, "", 0, false},
		{"malformed: sixteen digits", `"d";r=0;t=1234567890123456`, "", 0, false},
		{"empty", ``, "", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := rateLimitDelay(tc.field, tc.policy, now)
			if got != tc.want || ok != tc.ok {
				t.Errorf("rateLimitDelay(%q, %q) = %v, %v; want %v, %v", tc.field, tc.policy, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestParseSF(t *testing.T) {
	t.Parallel()
	items, more, ok := parseSF(`"burst";q=100;w=60, daily;q=1000;w=86400;flag, "a\"b"`, false)
	if !ok || more || len(items) != 3 {
		t.Fatalf("parseSF = %v, %v; want 3 items", items, ok)
	}
	if items[0].value != "burst" || items[0].params["q"] != "100" || items[0].params["w"] != "60" {
		t.Errorf("item 0 = %+v", items[0])
	}
	if items[1].value != "daily" || items[1].params["flag"] != "?1" {
		t.Errorf("item 1 = %+v", items[1])
	}
	if items[2].value != `a"b` {
		t.Errorf("item 2 = %+v", items[2])
	}
	for _, bad := range []string{`"a\x"`, "\"\x01\"", `?2`, `:abc`, `:a%:`, `a;`, `a b`, `-`, `1.`, `a,,b`} {
		if items, _, ok := parseSF(bad, false); ok {
			t.Errorf("parseSF(%q) = %v, true; want failure", bad, items)
		}
	}
}

// TestParseSFBounds: parseSF reads at most maxSFItems items and
// maxSFBytes bytes, and never reads an item cut short.
func TestParseSFBounds(t *testing.T) {
	t.Parallel()
	list := func(n int, item string) string {
		return strings.TrimSuffix(strings.Repeat(item+", ", n), ", ")
	}
	items, more, ok := parseSF(list(maxSFItems+1, "a;q=1"), false)
	if !ok || !more || len(items) != maxSFItems {
		t.Errorf("%d items: %d items, more %v, ok %v; want %d, true, true", maxSFItems+1, len(items), more, ok, maxSFItems)
	}
	if _, more, ok := parseSF(list(maxSFItems, "a;q=1"), false); !ok || more {
		t.Errorf("%d items: more %v, ok %v; want false, true", maxSFItems, more, ok)
	}
	// One item of about maxSFBytes, its number cut at every length near
	// the cut: the item is left out, never read as a smaller number.
	for pad := maxSFBytes - 12; pad <= maxSFBytes; pad++ {
		field := "a;x=" + strings.Repeat("y", pad) + ";q=123456, b;q=1"
		items, more, ok := parseSF(field, false)
		if !ok || !more || len(items) != 0 {
			t.Fatalf("cut at %d: %v, more %v, ok %v; want nothing, more", pad, items, more, ok)
		}
	}
	// Short items up to the cut: those before it are read.
	items, more, ok = parseSF(`"`+strings.Repeat("n", maxSFBytes/2)+`";q=5, b;q=123456789, c;q=1`+strings.Repeat(" ", maxSFBytes), false)
	if !ok || !more || len(items) != 2 || items[1].params["q"] != "123456789" {
		t.Errorf("items before the cut: %v, more %v, ok %v", items, more, ok)
	}
	// A bad item before the cut fails the field, as in a short one.
	if items, _, ok := parseSF("a;q=1, ?2, "+strings.Repeat("b, ", maxSFBytes), false); ok {
		t.Errorf("bad item before the cut: %v, true; want failure", items)
	}
	params := "a" + strings.Repeat(";k=1", maxSFParams) // one key, repeated
	for i := range maxSFParams {
		params += fmt.Sprintf(";k%d=1", i)
	}
	if items, _, ok := parseSF(params, false); ok {
		t.Errorf("%d parameters: %v, true; want failure", maxSFParams+1, items)
	}
}
