package providers

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetquota/throttle/config"
	"github.com/fleetquota/throttle/quota"
)

// TestCatalog loads the shipped catalog and resolves a sample request for
// every provider in it.
func TestCatalog(t *testing.T) {
	t.Parallel()
	cfg, err := LoadCatalog(WithLookupEnv(noEnv))
	if err != nil {
		t.Fatal(err)
	}
	reg := NewRegistry(cfg)
	biz := Input{Business: "acme", Labels: map[string]string{
		"model": "gpt-x", "twilio_from": "+15550100", "slack_channel": "C1", "plaid_item": "item-1",
	}}
	samples := []struct {
		provider, method, url string
		header                []string
		in                    Input
		route                 string
		tag                   string
		minItems              int
	}{
		{"stripe", "POST", "https://api.stripe.com/v1/payment_intents", []string{"Stripe-Account", "acct_1"}, Input{}, "payment-intents", "stripe:acct_1", 2},
		{"stripe", "GET", "https://api.stripe.com/v1/customers/search?query=x", nil, Input{}, "search", "stripe", 2},
		{"stripe", "POST", "https://files.stripe.com/v1/files", nil, Input{}, "files-write", "stripe", 2},
		{"stripe", "GET", "https://api.stripe.com/v1/balance", nil, Input{}, "other-endpoints", "stripe", 2},
		{"github", "GET", "https://api.github.com/repos/o/r", nil, biz, "", "github:acme", 2},
		{"github", "GET", "https://api.github.com/search/code?q=x", nil, biz, "code-search", "github:acme", 3},
		{"github", "GET", "https://api.github.com/search/issues?q=x", nil, biz, "search", "github:acme", 3},
		{"github", "POST", "https://api.github.com/repos/o/r/issues", nil, biz, "writes", "github:acme", 4},
		{"salesforce", "GET", "https://acme.my.salesforce.com/services/data/v60.0/sobjects", nil, biz, "", "salesforce:acme", 1},
		{"hubspot", "GET", "https://api.hubapi.com/crm/v3/objects/contacts", nil, biz, "", "hubspot:acme", 2},
		{"zendesk", "GET", "https://acme.zendesk.com/api/v2/tickets.json", nil, Input{}, "", "zendesk:acme.zendesk.com", 1},
		{"shopify", "GET", "https://shop.myshopify.com/admin/api/2025-01/products.json", nil, Input{}, "rest", "shopify:shop.myshopify.com", 1},
		{"shopify", "POST", "https://shop.myshopify.com/admin/api/2025-01/graphql.json", nil, Input{Cost: 50}, "graphql", "shopify:shop.myshopify.com", 1},
		{"twilio", "POST", "https://api.twilio.com/2010-04-01/Accounts/AC1/Messages.json", nil, biz, "messages", "twilio", 2},
		{"slack", "POST", "https://slack.com/api/chat.postMessage", nil, biz, "post-message", "slack", 1},
		{"slack", "GET", "https://slack.com/api/conversations.history", nil, biz, "conversations-history", "slack", 1},
		{"slack", "GET", "https://slack.com/api/team.info", nil, biz, "other-methods", "slack", 1},
		{"sendgrid", "POST", "https://api.sendgrid.com/v3/mail/send", nil, biz, "", "sendgrid:acme", 1},
		{"google", "POST", "https://analyticsreporting.googleapis.com/v4/reports:batchGet", nil, biz, "analytics", "google", 2},
		{"google", "GET", "https://docs.googleapis.com/v1/documents/abc", nil, biz, "docs-read", "google", 2},
		{"openai", "POST", "https://api.openai.com/v1/chat/completions", nil, biz, "", "openai:gpt-x", 1},
		{"anthropic", "POST", "https://api.anthropic.com/v1/messages", nil, biz, "", "anthropic:gpt-x", 1},
		{"notion", "GET", "https://api.notion.com/v1/pages/x", nil, biz, "", "notion:acme", 1},
		{"intercom", "GET", "https://api.intercom.io/contacts", nil, biz, "", "intercom", 2},
		{"discord", "POST", "https://discord.com/api/v10/channels/1/messages", nil, Input{}, "api", "discord", 1},
		{"plaid", "POST", "https://production.plaid.com/accounts/get", nil, biz, "accounts-get", "plaid", 2},
	}
	covered := map[string]bool{}
	for _, s := range samples {
		t.Run(s.provider+" "+s.method+" "+s.url, func(t *testing.T) {
			req, err := http.NewRequest(s.method, s.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i+1 < len(s.header); i += 2 {
				req.Header.Set(s.header[i], s.header[i+1])
			}
			res, ok, err := reg.Resolve(req, s.in)
			if !ok || err != nil || res.Provider.Name != s.provider {
				t.Fatalf("Resolve = %v, %v, %v; want %s", res.Provider, ok, err, s.provider)
			}
			route := ""
			if res.Route != nil {
				route = res.Route.Name
			}
			if route != s.route {
				t.Errorf("route %q, want %q", route, s.route)
			}
			if res.Request.Tag != s.tag {
				t.Errorf("tag %q, want %q", res.Request.Tag, s.tag)
			}
			if len(res.Request.Items) < s.minItems {
				t.Errorf("stack %s: want at least %d limits", stack(res.Request, res.Pause), s.minItems)
			}
			if err := res.Request.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
			// A fresh store admits the request at once.
			rv, err := quota.NewMemoryStore(quota.MemoryOptions{}).Reserve(context.Background(), &res.Request)
			if err != nil || !rv.Allowed || rv.Wait != 0 {
				t.Errorf("Reserve = %+v, %v; want admitted at once", rv, err)
			}
		})
		covered[s.provider] = true
	}
	for _, p := range cfg.Providers() {
		if !covered[p.Name] {
			t.Errorf("provider %s has no sample request", p.Name)
		}
		if !strings.HasPrefix(p.Source, "https://") || p.Read == "" {
			t.Errorf("provider %s: source %q read %q", p.Name, p.Source, p.Read)
		}
	}
	if n := len(cfg.Providers()); n < 12 {
		t.Errorf("catalog has %d providers, want at least 12", n)
	}
}

// TestCatalogVariables checks that the catalog's variables change what
// they say they change.
func TestCatalogVariables(t *testing.T) {
	t.Parallel()
	cfg, err := Load(CatalogName, config.Providers(), env(map[string]string{
		"STRIPE_GLOBAL": "25/s",
		"GITHUB_CORE":   "13500/h burst 1500",
	}))
	if err != nil {
		t.Fatal(err)
	}
	stripe, _ := cfg.Provider("stripe")
	if q := stripe.Limits[0].Quota; q.Rate != 25 || q.Period != 1111112*time.Microsecond || q.Burst != 22 { // 25/s * 90%
		t.Errorf("stripe global %d per %v burst %d, want 25 per 1.111112s burst 22", q.Rate, q.Period, q.Burst)
	}
	gh, _ := cfg.Provider("github")
	if got := gh.Limits[0].Quota.Rate; got != 12825 { // 13500 * 95%
		t.Errorf("github core rate %d, want 12825", got)
	}
}

// TestCatalogSalesforceRolling: Salesforce's allocation over a rolling 24
// hours is a rolling window of the allocation less headroom, which
// SALESFORCE_DAILY_ALLOCATION sets.
func TestCatalogSalesforceRolling(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want int64
	}{
		{nil, 95000}, // 100,000 * 95%
		{map[string]string{"SALESFORCE_DAILY_ALLOCATION": "150000"}, 142500},
	} {
		cfg, err := Load(CatalogName, config.Providers(), env(tc.env))
		if err != nil {
			t.Fatal(err)
		}
		sf, _ := cfg.Provider("salesforce")
		want := quota.Limit{Name: "daily-rolling", Kind: quota.Rolling, Rate: tc.want, Period: 24 * time.Hour}
		if got := *sf.Limits[0].Quota; !got.Equal(&want) {
			t.Errorf("env %v: salesforce limit %+v, want %+v", tc.env, got, want)
		}
	}
}

// inferredTenant is the rule that chose a provider's tag before the keys
// field: per tenant when every limit, routes included, had the same scope
// other than provider.
func inferredTenant(p *Provider) (Scope, bool) {
	lims := p.allLimits()
	if len(lims) == 0 {
		return Scope{}, false
	}
	s := lims[0].Scope
	for _, l := range lims {
		if l.Scope != s {
			return Scope{}, false
		}
	}
	return s, s.Kind != ScopeProvider
}

// TestCatalogKeysDidNotMove checks that every catalog provider keeps the
// tag mode (and tenant scope) the inference gave it before the keys field
// existed, so a fleet running the catalog keeps its state across the
// upgrade.
func TestCatalogKeysDidNotMove(t *testing.T) {
	t.Parallel()
	cfg, err := LoadCatalog(WithLookupEnv(noEnv))
	if err != nil {
		t.Fatal(err)
	}
	tenants := 0
	for _, p := range cfg.Providers() {
		was, wasTenant := inferredTenant(p)
		is, isTenant := p.TenantScope()
		if wasTenant != isTenant || was != is {
			t.Errorf("%s: keys %s, tenant scope %v (%v); before the keys field: per tenant %v, scope %v",
				p.Name, p.Keys, is, isTenant, wasTenant, was)
		}
		if isTenant {
			tenants++
		}
	}
	if tenants == 0 {
		t.Error("no catalog provider has keys per tenant")
	}
}
