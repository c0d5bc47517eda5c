package backoff

import (
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
	items, ok := parseSF(`"burst";q=100;w=60, daily;q=1000;w=86400;flag, "a\"b"`, false)
	if !ok || len(items) != 3 {
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
		if items, ok := parseSF(bad, false); ok {
			t.Errorf("parseSF(%q) = %v, true; want failure", bad, items)
		}
	}
}
