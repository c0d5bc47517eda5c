package providers

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fleetquota/throttle/backoff"
	"github.com/fleetquota/throttle/quota"
)

// MaxFileSize bounds the configuration Load accepts.
const MaxFileSize = 4 << 20

// maxStack bounds the limits of one stack (a provider's plus a route's).
const maxStack = 32

// An Option changes how Load reads a configuration.
type Option interface{ apply(*options) }

type options struct {
	lookup     func(string) (string, bool)
	allowMoves bool
}

// newOptions applies opts over the defaults.
func newOptions(opts []Option) options {
	o := options{lookup: os.LookupEnv}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	if o.lookup == nil {
		o.lookup = os.LookupEnv
	}
	return o
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithLookupEnv sets the function that ${VAR} and ${VAR:-default} read
// variables from. The default is os.LookupEnv; tests pass a map's lookup so
// they never touch the real environment.
func WithLookupEnv(lookup func(name string) (string, bool)) Option {
	return optionFunc(func(o *options) { o.lookup = lookup })
}

// AllowMovedKeys makes Registry.Reload and ReloadFile accept a
// configuration that moves a provider's keys to other hash tags (see
// ErrKeysMoved): for a deliberate change, made with every process
// stopped or accepting that spent quota is forgotten. Load ignores it.
func AllowMovedKeys() Option {
	return optionFunc(func(o *options) { o.allowMoves = true })
}

// A Config is a loaded, validated configuration. It is immutable and safe
// for concurrent use; a Registry serves one at a time.
type Config struct {
	name      string
	providers []*Provider
	byName    map[string]*Provider
	hosts     hostIndex
}

// Name is the file name the configuration was loaded from.
func (c *Config) Name() string { return c.name }

// Providers returns the providers in the order of the file.
func (c *Config) Providers() []*Provider {
	return append([]*Provider(nil), c.providers...)
}

// Provider returns the provider with the given name.
func (c *Config) Provider(name string) (*Provider, bool) {
	p, ok := c.byName[name]
	return p, ok
}

// LoadFile reads and loads the configuration file at path. See Load.
func LoadFile(path string, opts ...Option) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	return Load(path, data, opts...)
}

// Load parses and validates a configuration. name is used in error
// messages (usually the file name). Every problem found is reported in one
// *ConfigError, which wraps ErrConfig.
func Load(name string, data []byte, opts ...Option) (cfg *Config, err error) {
	o := newOptions(opts)
	l := &loader{file: name, lookup: o.lookup}
	// The YAML parser is third-party code fed untrusted input: whatever
	// it does, Load reports a problem instead of panicking.
	defer func() {
		if r := recover(); r != nil {
			cfg, err = nil, &ConfigError{Problems: []Problem{{File: name, Message: fmt.Sprintf("internal error reading the configuration: %v", r)}}}
		}
	}()
	cfg = l.load(data)
	if len(l.problems) > 0 {
		l.keepFirst(MaxProblems)
		return nil, &ConfigError{Problems: l.problems, More: l.dropped}
	}
	return cfg, nil
}

type loader struct {
	file     string
	lookup   func(string) (string, bool)
	problems []Problem
	dropped  int // problems found after the first MaxProblems, by position
}

// add records a problem. Every problem's text passes here, so this is
// where what it repeats of the file is bounded: a string argument printed
// with %q shows at most maxEcho bytes of it, escaped (see echoed), and the
// whole message and path are clipped. At most 2*MaxProblems problems are
// held at a time, so a file of errors costs bounded memory.
func (l *loader) add(n *yaml.Node, path, format string, args ...any) {
	for i, a := range args {
		if s, ok := a.(string); ok {
			args[i] = echoed(s)
		}
	}
	p := Problem{File: l.file, Path: clip(path, maxPath), Message: clip(fmt.Sprintf(format, args...), maxMessage)}
	if n != nil {
		p.Line, p.Column = n.Line, n.Column
	}
	l.problems = append(l.problems, p)
	if len(l.problems) >= 2*MaxProblems {
		l.keepFirst(MaxProblems)
	}
}

// keepFirst sorts the problems by position (a stable sort: problems at one
// position keep the order they were found in) and keeps the first max,
// counting the rest in dropped.
func (l *loader) keepFirst(max int) {
	sort.SliceStable(l.problems, func(i, j int) bool {
		a, b := l.problems[i], l.problems[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	if len(l.problems) > max {
		l.dropped += len(l.problems) - max
		l.problems = l.problems[:max:max]
	}
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func (l *loader) load(data []byte) *Config {
	if len(data) > MaxFileSize {
		l.add(nil, "", "the file is larger than %d bytes", MaxFileSize)
		return nil
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			l.add(nil, "", "the file is empty: want a mapping with \"providers\"")
			return nil
		}
		msg := err.Error()
		p := Problem{File: l.file, Message: msg}
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			p.Line, _ = strconv.Atoi(m[1])
			p.Message = "YAML syntax: " + m[2]
		}
		p.Message = clip(p.Message, maxMessage)
		l.problems = append(l.problems, p)
		return nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		l.add(&extra, "", "a second YAML document: the configuration is one document")
	} else if !errors.Is(err, io.EOF) {
		l.add(nil, "", "after the first document: %v", err)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if !l.checkTree(root, "", 0) {
		return nil
	}
	f := l.fields(root, "", "version", "providers")
	if f == nil {
		return nil
	}
	if v := f["version"]; v != nil {
		if n, ok := l.integer(v, "version", 0, maxCount); ok && n != 1 {
			l.add(v, "version", "unknown version %d: want 1", n)
		}
	}
	pn := f["providers"]
	if pn == nil {
		l.add(root, "providers", "missing: want a mapping of provider names to providers")
		return nil
	}
	if pn.Kind != yaml.MappingNode {
		l.wrongKind(pn, "providers", "a mapping of provider names to providers")
		return nil
	}
	cfg := &Config{
		name:   l.file,
		byName: make(map[string]*Provider),
		hosts:  hostIndex{exact: make(map[string]*Provider), wild: make(map[string]*Provider)},
	}
	type claim struct {
		p    *Provider
		line int
	}
	claims := make(map[string]claim)
	seen := make(map[string]int)
	for i := 0; i+1 < len(pn.Content); i += 2 {
		k, v := pn.Content[i], pn.Content[i+1]
		path := "providers." + pathPart(k.Value)
		if k.Kind != yaml.ScalarNode {
			l.add(k, "providers", "a provider name must be a string")
			continue
		}
		if line, dup := seen[k.Value]; dup {
			l.add(k, path, "provider %q is already defined at line %d: provider names are unique", k.Value, line)
			continue
		}
		seen[k.Value] = k.Line
		if !validName(k.Value) {
			l.add(k, path, "invalid provider name %q: %s", k.Value, nameRule)
		}
		p, hostNodes := l.provider(k.Value, v, path)
		if p == nil {
			continue
		}
		for j, h := range p.Hosts {
			key, wild, msg := normalizeHost(h)
			hp := fmt.Sprintf("%s.hosts[%d]", path, j)
			if msg != "" {
				l.add(hostNodes[j], hp, "%s", msg)
				continue
			}
			if c, dup := claims[key]; dup {
				if c.p == p {
					l.add(hostNodes[j], hp, "host %q is listed twice", h)
				} else {
					l.add(hostNodes[j], hp, "host %q is already claimed by provider %q (line %d): a host belongs to one provider", h, c.p.Name, c.line)
				}
				continue
			}
			claims[key] = claim{p, hostNodes[j].Line}
			if wild {
				cfg.hosts.wild[key] = p
			} else {
				cfg.hosts.exact[key] = p
			}
		}
		cfg.providers = append(cfg.providers, p)
		cfg.byName[p.Name] = p
	}
	if len(cfg.providers) == 0 && len(l.problems) == 0 {
		l.add(pn, "providers", "no providers: want at least one")
	}
	return cfg
}

// checkTree rejects aliases and merge keys, which the configuration does
// not support, and bounds the depth.
func (l *loader) checkTree(n *yaml.Node, path string, depth int) bool {
	if depth > 20 {
		l.add(n, path, "nested too deeply")
		return false
	}
	if n.Kind == yaml.AliasNode {
		l.add(n, path, "aliases (*name) are not supported: write the value out")
		return false
	}
	ok := true
	for i, c := range n.Content {
		if n.Kind == yaml.MappingNode && i%2 == 0 && c.Tag == "!!merge" {
			l.add(c, path, "merge keys (<<) are not supported: write the fields out")
			ok = false
			continue
		}
		if !l.checkTree(c, path, depth+1) {
			ok = false
		}
	}
	return ok
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return quote(n.Value)
	}
	return "something else"
}

func (l *loader) wrongKind(n *yaml.Node, path, want string) {
	l.add(n, path, "want %s, got %s", want, kindName(n))
}

// fields returns the values of a mapping by key, reporting keys that are
// not known (listing the valid ones), duplicated or not strings. It
// returns nil when n is not a mapping.
func (l *loader) fields(n *yaml.Node, path string, known ...string) map[string]*yaml.Node {
	if n.Kind != yaml.MappingNode {
		l.wrongKind(n, path, "a mapping with fields "+strings.Join(known, ", "))
		return nil
	}
	out := make(map[string]*yaml.Node, len(n.Content)/2)
	lines := make(map[string]int)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		fp := join(path, k.Value)
		if k.Kind != yaml.ScalarNode {
			l.add(k, path, "a field name must be a string")
			continue
		}
		if line, dup := lines[k.Value]; dup {
			l.add(k, fp, "field %q is already set at line %d", k.Value, line)
			continue
		}
		lines[k.Value] = k.Line
		isKnown := false
		for _, f := range known {
			if f == k.Value {
				isKnown = true
				break
			}
		}
		if !isKnown {
			l.add(k, fp, "unknown field %q: valid fields are %s", k.Value, strings.Join(known, ", "))
			continue
		}
		out[k.Value] = v
	}
	return out
}

// join appends a key from the file to a field path.
func join(path, field string) string {
	if path == "" {
		return pathPart(field)
	}
	return path + "." + pathPart(field)
}

// str returns a scalar's value with ${VAR} expanded.
func (l *loader) str(n *yaml.Node, path, want string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		l.wrongKind(n, path, want)
		return "", false
	}
	v, err := expand(n.Value, l.lookup)
	if err != nil {
		l.add(n, path, "%v", err)
		return "", false
	}
	return v, true
}

// integer returns a scalar as an integer in [lo, hi].
func (l *loader) integer(n *yaml.Node, path string, lo, hi int64) (int64, bool) {
	want := fmt.Sprintf("an integer from %d to %d", lo, hi)
	s, ok := l.str(n, path, want)
	if !ok {
		return 0, false
	}
	v, ok := parseCount(s)
	if !ok && strings.HasPrefix(s, "-") {
		if x, err := strconv.ParseInt(s, 10, 64); err == nil {
			v, ok = x, true
		}
	}
	if !ok || v < lo || v > hi {
		l.add(n, path, "want %s, got %q", want, s)
		return 0, false
	}
	return v, true
}

// duration returns a scalar as a positive Go duration.
func (l *loader) duration(n *yaml.Node, path string, allowZero bool) (time.Duration, bool) {
	want := `a duration such as "30s", "1m30s" or "2h"`
	s, ok := l.str(n, path, want)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d == 0 && !allowZero {
		l.add(n, path, "want %s, got %q", want, s)
		return 0, false
	}
	return d, true
}

// enum returns a scalar that must be one of values.
func (l *loader) enum(n *yaml.Node, path string, values ...string) (int, bool) {
	want := "one of " + strings.Join(values, ", ")
	s, ok := l.str(n, path, want)
	if !ok {
		return 0, false
	}
	for i, v := range values {
		if s == v {
			return i, true
		}
	}
	l.add(n, path, "want %s, got %q", want, s)
	return 0, false
}

// list returns the items of a sequence.
func (l *loader) list(n *yaml.Node, path, want string) ([]*yaml.Node, bool) {
	if n.Kind != yaml.SequenceNode {
		l.wrongKind(n, path, want)
		return nil, false
	}
	return n.Content, true
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

const nameRule = "want lower-case letters, digits, \"-\" and \"_\", starting with a letter or digit, at most 64 characters"

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

func validName(s string) bool { return nameRE.MatchString(s) }

var providerFields = []string{
	"hosts", "source", "read", "limits", "routes", "on_limit", "max_wait", "headroom",
	"mode", "on_store_error", "local_share", "signals", "keys", "sync",
}

// provider decodes one provider. It returns nil only when v is not a
// mapping; otherwise a provider with whatever could be decoded (problems
// are recorded), and the nodes of its hosts.
func (l *loader) provider(name string, v *yaml.Node, path string) (*Provider, []*yaml.Node) {
	f := l.fields(v, path, providerFields...)
	if f == nil {
		return nil, nil
	}
	p := &Provider{Name: name, Headroom: 1}
	var hostNodes []*yaml.Node
	if n := f["hosts"]; n == nil {
		l.add(v, path+".hosts", "missing: want a list of host names, e.g. [api.example.com, \"*.example.com\"]")
	} else if items, ok := l.list(n, path+".hosts", "a list of host names"); ok {
		if len(items) == 0 {
			l.add(n, path+".hosts", "empty: want at least one host")
		}
		for i, it := range items {
			if s, ok := l.str(it, index(path+".hosts", i), "a host name"); ok {
				p.Hosts = append(p.Hosts, s)
				hostNodes = append(hostNodes, it)
			}
		}
	}
	if n := f["source"]; n != nil {
		p.Source, _ = l.str(n, path+".source", "a URL")
	}
	if n := f["read"]; n != nil {
		p.Read, _ = l.str(n, path+".read", "a date")
	}
	if n := f["on_limit"]; n != nil {
		if i, ok := l.enum(n, path+".on_limit", "wait", "fail"); ok {
			p.OnLimit = OnLimit(i)
		}
	}
	if n := f["max_wait"]; n != nil {
		if d, ok := l.duration(n, path+".max_wait", true); ok {
			p.MaxWait = d
			if d > quota.LongestWait {
				l.add(n, path+".max_wait", "max_wait %v is above the longest wait a store grants, %v (about 71 years): "+
					"no request waits that long; give the longest wait you mean, e.g. 24h to wait for a daily quota", d, quota.LongestWait)
			} else if p.OnLimit == Fail {
				l.add(n, path+".max_wait", "max_wait has no effect with on_limit: fail; remove it or use on_limit: wait")
			}
		}
	} else if p.OnLimit == Wait {
		p.MaxWait = DefaultMaxWait
	}
	bp := int64(10000)
	if n := f["headroom"]; n != nil {
		if s, ok := l.str(n, path+".headroom", "a share"); ok {
			if v, ok := parseShare(s); ok {
				bp = v
				p.Headroom = float64(v) / 10000
			} else {
				l.add(n, path+".headroom", "want a share of the published limits above 0 and at most 100%%, e.g. 95%% or 0.95, got %q", s)
			}
		}
	}
	if n := f["mode"]; n != nil {
		if i, ok := l.enum(n, path+".mode", "enforce", "shadow"); ok {
			p.Mode = Mode(i)
		}
	}
	if n := f["on_store_error"]; n != nil {
		if i, ok := l.enum(n, path+".on_store_error", "fail_closed", "fail_open", "local"); ok {
			p.OnStoreError = StoreErrorPolicy(i)
		}
	}
	if n := f["local_share"]; n != nil {
		if s, ok := l.str(n, path+".local_share", "a share"); ok {
			if v, ok := parseShare(s); !ok {
				l.add(n, path+".local_share", "want a share of each rate above 0 and at most 100%%, e.g. 10%% or 0.1, got %q", s)
			} else if p.OnStoreError != Local {
				l.add(n, path+".local_share", "local_share only applies to on_store_error: local")
			} else {
				p.LocalShare = float64(v) / 10000
			}
		}
	} else if p.OnStoreError == Local {
		l.add(f["on_store_error"], path+".local_share", "missing: on_store_error: local needs local_share, the share of each rate one process may use alone, e.g. 10%%")
	}
	if n := f["signals"]; n != nil {
		p.Signals = l.signals(n, path+".signals")
	}
	keys := f["keys"]
	if keys != nil {
		if i, ok := l.enum(keys, path+".keys", "per_provider", "per_tenant"); ok {
			p.Keys = KeyMode(i)
		}
	}
	names := make(map[string]string) // limit name -> path of its definition
	var limitNodes, routeNodes []*limitNodes
	if n := f["limits"]; n != nil {
		p.Limits, limitNodes = l.limits(n, path+".limits", bp, names)
	}
	if n := f["routes"]; n != nil {
		p.Routes, routeNodes = l.routes(p, n, path+".routes", bp, names, limitNodes)
	}
	if n := f["sync"]; n != nil {
		p.Sync = l.sync(n, path+".sync", "provider "+p.Name, append(limitNodes, routeNodes...))
	}
	if len(p.Limits) == 0 && len(p.Routes) == 0 && f["limits"] == nil {
		l.add(v, path+".limits", "missing: want a list of limits (or routes with limits)")
	}
	// A request that matches no route has cost 1, which every limit admits.
	l.finish(p)
	l.tenantKeys(p, append(limitNodes, routeNodes...), keys, path+".keys")
	return p, hostNodes
}

// tenantKeys checks that, with keys per tenant, every limit of the
// provider (routes included) has one scope, and sets it as the tenant
// scope. lims are the provider's limits in file order.
func (l *loader) tenantKeys(p *Provider, lims []*limitNodes, keys *yaml.Node, path string) {
	if p.Keys != PerTenant {
		return
	}
	// Every key of a tenant must live in that tenant's tag whatever the
	// route, and a limit's state must never be split between two tags: a
	// provider-wide limit, or one scoped otherwise, has no place there.
	var first *limitNodes
	for _, ln := range lims {
		if ln.lim.Scope.Kind != ScopeProvider {
			first = ln
			break
		}
	}
	if first == nil {
		l.add(keys, path, "keys: per_tenant gives each tenant's keys a hash tag of their own, but no limit of provider %q is scoped per tenant: scope its limits (e.g. scope: business) or remove keys", p.Name)
		return
	}
	p.tenant = first.lim.Scope
	for _, ln := range lims {
		sc := ln.lim.Scope
		if sc == p.tenant {
			continue
		}
		node, fp := ln.scope, ln.path+".scope"
		if node == nil {
			node = ln.node
		}
		what := "is provider-wide"
		if sc.Kind != ScopeProvider {
			what = "is scoped by " + sc.String()
		}
		l.add(node, fp, "limit %s %s, but keys: per_tenant keeps each %s value's keys in a hash tag of its own (the scope of limit %s, line %d): its state would be split across the tenants' tags, each copy admitting the whole limit. Scope it by %s, or remove keys: per_tenant (line %d) to keep every key in the tag %q",
			ln.lim.Quota.Name, what, p.tenant, first.lim.Quota.Name, first.node.Line, p.tenant, keys.Line, p.Name)
	}
}

func (l *loader) signals(n *yaml.Node, path string) backoff.Signals {
	var s backoff.Signals
	f := l.fields(n, path, "throttled", "ignore", "delay_headers", "default_delay", "max_delay", "body")
	if f == nil {
		return s
	}
	if r := f["throttled"]; r != nil {
		s.Rules = l.rules(r, path+".throttled")
	}
	if r := f["ignore"]; r != nil {
		s.Ignore = l.rules(r, path+".ignore")
	}
	if r := f["delay_headers"]; r != nil {
		if items, ok := l.list(r, path+".delay_headers", "a list of header names"); ok {
			for i, it := range items {
				if h, ok := l.header(it, index(path+".delay_headers", i)); ok {
					s.DelayHeaders = append(s.DelayHeaders, h)
				}
			}
		}
	}
	if r := f["default_delay"]; r != nil {
		s.DefaultDelay, _ = l.duration(r, path+".default_delay", false)
	}
	if r := f["max_delay"]; r != nil {
		s.MaxDelay, _ = l.duration(r, path+".max_delay", false)
	}
	if r := f["body"]; r != nil {
		if b, ok := l.str(r, path+".body", "a body format"); ok {
			switch b {
			case backoff.BodyDiscord, backoff.BodyOpenAI:
				s.Body = b
			default:
				l.add(r, path+".body", "unknown body format %q: want %s (retry_after and global in a 429's JSON) or %s (insufficient_quota, a billing stop)",
					b, backoff.BodyDiscord, backoff.BodyOpenAI)
			}
		}
	}
	return s
}

// header returns a scalar as a canonical header name.
func (l *loader) header(n *yaml.Node, path string) (string, bool) {
	s, ok := l.str(n, path, "a header name")
	if !ok {
		return "", false
	}
	if !validToken(s) {
		l.add(n, path, "invalid header name %q: want letters, digits and -", s)
		return "", false
	}
	return http.CanonicalHeaderKey(s), true
}

func validToken(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

func (l *loader) rules(n *yaml.Node, path string) []backoff.Rule {
	items, ok := l.list(n, path, "a list of rules {status, header, header_value, body_contains}")
	if !ok {
		return nil
	}
	var out []backoff.Rule
	for i, it := range items {
		ip := index(path, i)
		f := l.fields(it, ip, "status", "header", "header_value", "body_contains")
		if f == nil {
			continue
		}
		var r backoff.Rule
		good := true
		if s := f["status"]; s == nil {
			l.add(it, ip+".status", "missing: every rule names a status code, e.g. 429")
			good = false
		} else if v, ok := l.integer(s, ip+".status", 100, 599); ok {
			r.Status = int(v)
		} else {
			good = false
		}
		if h := f["header"]; h != nil {
			r.Header, ok = l.header(h, ip+".header")
			good = good && ok
		}
		if h := f["header_value"]; h != nil {
			r.HeaderValue, _ = l.str(h, ip+".header_value", "a header value")
			if f["header"] == nil {
				l.add(h, ip+".header_value", "header_value needs header: the name of the header to compare")
				good = false
			}
		}
		if b := f["body_contains"]; b != nil {
			if r.BodyContains, ok = l.str(b, ip+".body_contains", "a string"); ok && r.BodyContains == "" {
				l.add(b, ip+".body_contains", "empty: want the text the body must contain, or leave the field out")
				good = false
			}
		}
		if good {
			out = append(out, r)
		}
	}
	return out
}

// limitNodes keeps the positions of one limit's fields for later checks.
type limitNodes struct {
	path     string
	node     *yaml.Node // the limit's mapping
	scope    *yaml.Node // its scope field, or nil
	capacity *yaml.Node // where a too-small capacity is reported
	capField string     // its field name
	lim      *Limit
}

var limitFields = []string{
	"name", "limit", "rate", "period", "burst", "quota", "per", "resets", "timezone",
	"rolling", "scope", "missing", "only",
}

func (l *loader) limits(n *yaml.Node, path string, bp int64, names map[string]string) ([]Limit, []*limitNodes) {
	items, ok := l.list(n, path, "a list of limits")
	if !ok {
		return nil, nil
	}
	var out []Limit
	var nodes []*limitNodes
	for i, it := range items {
		ip := index(path, i)
		lim, ln := l.limit(it, ip, bp, names)
		if lim != nil {
			out = append(out, *lim)
			nodes = append(nodes, ln)
		}
	}
	for i := range nodes {
		nodes[i].lim = &out[i]
	}
	return out, nodes
}

func (l *loader) limit(n *yaml.Node, path string, bp int64, names map[string]string) (*Limit, *limitNodes) {
	f := l.fields(n, path, limitFields...)
	if f == nil {
		return nil, nil
	}
	ln := &limitNodes{path: path, node: n}
	good := true
	bad := func(node *yaml.Node, p, format string, args ...any) {
		l.add(node, p, format, args...)
		good = false
	}
	q := &quota.Limit{}
	if nn := f["name"]; nn == nil {
		bad(n, path+".name", "missing: every limit has a name (it names its keys and errors)")
	} else if s, ok := l.str(nn, path+".name", "a name"); !ok {
		good = false
	} else if !validName(s) {
		bad(nn, path+".name", "invalid limit name %q: %s", s, nameRule)
	} else if s == pauseKey {
		bad(nn, path+".name", "%q is reserved for the provider's pause key: choose another name", s)
	} else if prev, dup := names[s]; dup {
		bad(nn, path+".name", "limit name %q is already used by %s: names are unique within a provider, routes included", s, prev)
	} else {
		q.Name = s
		names[s] = path
	}

	var sf shortForm
	var tzNode, resetNode *yaml.Node
	var tz string
	tzPath := path + ".timezone"
	hasReset := false
	if sn := f["limit"]; sn != nil {
		for _, k := range []string{"rate", "period", "quota", "per", "rolling"} {
			if f[k] != nil {
				bad(f[k], path+"."+k, "%s cannot be combined with the short form \"limit\": write one or the other", k)
			}
		}
		if s, ok := l.str(sn, path+".limit", "a limit such as 100/s"); !ok {
			good = false
		} else if v, msg := parseShort(s); msg != "" {
			bad(sn, path+".limit", "%s", msg)
		} else if v.rate == 0 {
			bad(sn, path+".limit", "a rate of 0 admits nothing: want at least 1 (leave the limit out to not limit)")
		} else {
			sf = v
			ln.capacity, ln.capField = sn, "limit"
			if sf.tz != "" {
				tz, tzNode, tzPath = sf.tz, sn, path+".limit"
			}
			if sf.hasReset {
				hasReset, resetNode = true, sn
			}
		}
	} else {
		switch {
		case f["rate"] != nil && f["quota"] != nil:
			bad(f["quota"], path+".quota", "a limit has either rate (GCRA) or quota (calendar window), not both")
		case f["rate"] != nil:
			sf.kind = quota.GCRA
			ln.capacity, ln.capField = f["rate"], "rate"
			if v, ok := l.integer(f["rate"], path+".rate", 1, maxCount); ok {
				sf.rate = v
			} else {
				good = false
			}
			if pn := f["period"]; pn == nil {
				bad(n, path+".period", "missing: a GCRA limit needs a period, e.g. period: 1s")
			} else if d, ok := l.duration(pn, path+".period", false); ok {
				sf.period = d
			} else {
				good = false
			}
			if f["per"] != nil {
				bad(f["per"], path+".per", "per is the unit of a calendar window (with quota); a GCRA limit has a period")
			}
			if rn := f["rolling"]; rn != nil {
				bad(rn, path+".rolling", "rolling belongs to a quota (quota and per: a rolling window); a GCRA limit has rate and period")
			}
		case f["quota"] != nil && f["rolling"] != nil && rolls(f["rolling"]):
			sf.kind = quota.Rolling
			ln.capacity, ln.capField = f["quota"], "quota"
			if v, ok := l.integer(f["quota"], path+".quota", 1, maxCount); ok {
				sf.rate = v
			} else {
				good = false
			}
			if pn := f["per"]; pn == nil {
				bad(n, path+".per", "missing: a rolling window needs per, its period, e.g. per: 24h")
			} else if s, ok := l.str(pn, path+".per", "a duration such as 24h"); !ok {
				good = false
			} else if d, ok := rollingPeriods[s]; ok {
				sf.period = d
			} else if d, err := time.ParseDuration(s); err == nil && d > 0 {
				sf.period = d
			} else {
				bad(pn, path+".per", "want the rolling period as a duration such as 24h, 10s or 1h30m (or hour or day), got %q", s)
			}
			if f["period"] != nil {
				bad(f["period"], path+".period", "period belongs to a GCRA limit (with rate); a rolling window has per")
			}
		case f["quota"] != nil:
			sf.kind = quota.Window
			ln.capacity, ln.capField = f["quota"], "quota"
			if v, ok := l.integer(f["quota"], path+".quota", 1, maxCount); ok {
				sf.rate = v
			} else {
				good = false
			}
			if pn := f["per"]; pn == nil {
				bad(n, path+".per", "missing: a calendar window needs per: hour, day or month")
			} else if i, ok := l.enum(pn, path+".per", "hour", "day", "month"); ok {
				sf.unit = []quota.Unit{quota.Hour, quota.Day, quota.Month}[i]
			} else {
				good = false
			}
			if f["period"] != nil {
				bad(f["period"], path+".period", "period belongs to a GCRA limit (with rate); a calendar window has per")
			}
		default:
			bad(n, path, "missing the limit itself: want limit (e.g. \"100/s\"), rate and period (GCRA) or quota and per (calendar window)")
		}
	}
	if rn := f["rolling"]; rn != nil && f["limit"] == nil && f["rate"] == nil {
		if _, ok := l.enum(rn, path+".rolling", "false", "true"); !ok {
			good = false
		}
	}
	if bn := f["burst"]; bn != nil {
		switch {
		case sf.kind == quota.Rolling:
			bad(bn, path+".burst", "a rolling window has no burst: its whole quota is available at once")
		case sf.kind == quota.Window:
			bad(bn, path+".burst", "a calendar window has no burst: its whole quota is available at once")
		case sf.kind == quota.Concurrency:
			bad(bn, path+".burst", "a concurrency limit has no burst: its leases are all available at once")
		case sf.burst != 0:
			bad(bn, path+".burst", "burst is already given in the short form")
		default:
			if v, ok := l.integer(bn, path+".burst", 1, maxCount); ok {
				sf.burst = v
				ln.capacity, ln.capField = bn, "burst"
			} else {
				good = false
			}
		}
	}
	if rn := f["resets"]; rn != nil {
		if hasReset {
			bad(rn, path+".resets", "the reset time is already given in the short form")
		} else if s, ok := l.str(rn, path+".resets", "a time HH:MM"); ok {
			if d, ok := parseClock(s); ok {
				sf.reset, hasReset, resetNode = d, true, rn
			} else {
				bad(rn, path+".resets", "want a time HH:MM from 00:00 to 23:59, got %q", s)
			}
		} else {
			good = false
		}
	}
	if tn := f["timezone"]; tn != nil {
		if tzNode != nil {
			bad(tn, path+".timezone", "the time zone is already given in the short form")
		} else if s, ok := l.str(tn, path+".timezone", "an IANA time zone such as America/Los_Angeles"); ok {
			tz, tzNode = s, tn
		} else {
			good = false
		}
	}
	if sf.kind != quota.Window && (resetNode != nil || tzNode != nil) {
		node := resetNode
		if node == nil {
			node = tzNode
		}
		bad(node, path, "resets and timezone belong to calendar windows (quota per hour, day or month); this limit is %s", sf.kind)
	}
	if sf.kind == quota.Window {
		q.Calendar.Unit = sf.unit
		q.Calendar.Reset = sf.reset
		if sf.unit == quota.Hour && hasReset {
			if sf.reset >= time.Hour {
				bad(resetNode, path+".resets", "an hourly window resets within the hour: want 00:MM, e.g. 00:30 for half past")
			}
		}
		if tz != "" {
			switch loc, err := loadLocation(tz); {
			case err != nil:
				bad(tzNode, tzPath, "unknown time zone %q: want an IANA name such as UTC, Europe/Berlin or America/Los_Angeles", tz)
			default:
				q.Calendar.Location = loc
			}
		}
	}
	q.Kind = sf.kind
	q.Rate = scale(sf.rate, bp)
	q.Period = sf.period
	if sf.burst != 0 {
		q.Burst = scale(sf.burst, bp)
	}
	lim := &Limit{Quota: q}
	if sn := f["scope"]; sn != nil {
		ln.scope = sn
		if s, ok := l.str(sn, path+".scope", "a scope"); ok {
			if sc, ok := parseScope(s); ok {
				lim.Scope = sc
			} else {
				bad(sn, path+".scope", "want provider, business, host, header:<Header-Name> or label:<name>, got %q", s)
			}
		} else {
			good = false
		}
	}
	if mn := f["missing"]; mn != nil {
		if i, ok := l.enum(mn, path+".missing", "shared", "skip", "refuse"); ok {
			lim.Missing = Missing(i)
			if lim.Scope.Kind == ScopeProvider || lim.Scope.Kind == ScopeHost {
				bad(mn, path+".missing", "a provider-wide or host limit always has its scope; missing applies to business, header and label scopes")
			}
		} else {
			good = false
		}
	}
	if on := f["only"]; on != nil {
		if items, ok := l.list(on, path+".only", "a list of scope values"); ok {
			if lim.Scope.Kind == ScopeProvider {
				bad(on, path+".only", "only applies to business, host, header and label scopes")
			}
			for i, it := range items {
				if s, ok := l.str(it, index(path+".only", i), "a scope value"); ok {
					lim.Only = append(lim.Only, s)
				}
			}
			if len(items) == 0 {
				bad(on, path+".only", "empty: list the scope values the limit applies to, or leave the field out")
			}
		}
	}
	if !good {
		return nil, nil
	}
	if q.Kind == quota.Rolling && (q.Period < quota.MinRollingPeriod || q.Period.Microseconds() > quota.MaxExact) {
		l.add(ln.capacity, join(path, ln.capField), "a rolling period of %v is out of range: want %v to 71 years", q.Period, quota.MinRollingPeriod)
		return nil, nil
	}
	// The engine's own rules, as a backstop: the checks above should
	// have caught everything it rejects.
	if q.Kind == quota.GCRA {
		if q.Period < time.Microsecond || q.Period.Microseconds()/q.Rate == 0 {
			l.add(ln.capacity, join(path, ln.capField), "%d per %v is finer than one event per microsecond: lower the rate or lengthen the period", q.Rate, q.Period)
			return nil, nil
		}
		if iv := q.Interval(); q.Capacity() > math.MaxInt64/4/iv {
			l.add(ln.capacity, join(path, ln.capField), "burst %d times an interval of %dµs is too large", q.Capacity(), iv)
			return nil, nil
		}
	}
	if err := q.Validate(); err != nil {
		l.add(n, path, "%v", err)
		return nil, nil
	}
	return lim, ln
}

// rollingPeriods are the words a rolling window's per may be besides a
// duration.
var rollingPeriods = map[string]time.Duration{"hour": time.Hour, "day": 24 * time.Hour}

// rolls reads a limit's rolling field: anything but false makes the limit
// a rolling window, so that its per is read as one (an invalid value is
// reported where the field is checked).
func rolls(n *yaml.Node) bool { return n.Value != "false" }

// loadLocation loads an IANA time zone. "Local" depends on the machine and
// is refused.
func loadLocation(name string) (*time.Location, error) {
	if name == "Local" || name == "" || len(name) > 64 {
		return nil, errors.New("unknown time zone")
	}
	return time.LoadLocation(name)
}

// scale applies headroom in basis points: floor(n*bp/10000), at least 1.
func scale(n, bp int64) int64 {
	if n <= 0 {
		return n
	}
	hi, lo := bits.Mul64(uint64(n), uint64(bp))
	q, _ := bits.Div64(hi, lo, 10000)
	if q < 1 {
		return 1
	}
	return int64(q)
}

func parseScope(s string) (Scope, bool) {
	switch s {
	case "provider":
		return Scope{Kind: ScopeProvider}, true
	case "business":
		return Scope{Kind: ScopeBusiness}, true
	case "host":
		return Scope{Kind: ScopeHost}, true
	}
	kind, name, ok := strings.Cut(s, ":")
	if !ok {
		return Scope{}, false
	}
	switch kind {
	case "header":
		if validToken(name) {
			return Scope{Kind: ScopeHeader, Name: http.CanonicalHeaderKey(name)}, true
		}
	case "label":
		if name != "" && len(name) <= 64 && validToken(name) {
			return Scope{Kind: ScopeLabel, Name: name}, true
		}
	}
	return Scope{}, false
}

var validMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"}

var routeFields = []string{"name", "method", "path", "cost", "costs", "limits", "sync"}

// routes reads a provider's routes. It returns the valid ones and the
// nodes of their limits, in file order.
func (l *loader) routes(p *Provider, n *yaml.Node, path string, bp int64, names map[string]string, base []*limitNodes) ([]Route, []*limitNodes) {
	items, ok := l.list(n, path, "a list of routes")
	if !ok {
		return nil, nil
	}
	var out []Route
	var kept []*limitNodes
	var seen []Route // every route with a valid method and path
	for i, it := range items {
		ip := index(path, i)
		f := l.fields(it, ip, routeFields...)
		if f == nil {
			continue
		}
		r := Route{Name: "routes[" + strconv.Itoa(i) + "]", Cost: 1}
		good := true
		if nn := f["name"]; nn != nil {
			if s, ok := l.str(nn, ip+".name", "a name"); ok && validName(s) {
				r.Name = s
			} else if ok {
				l.add(nn, ip+".name", "invalid route name %q: %s", s, nameRule)
			}
		}
		if mn := f["method"]; mn != nil {
			var ms []*yaml.Node
			if mn.Kind == yaml.SequenceNode {
				ms = mn.Content
				if len(ms) == 0 {
					l.add(mn, ip+".method", "empty: list methods, or leave the field out for any method")
					good = false
				}
			} else {
				ms = []*yaml.Node{mn}
			}
			for j, m := range ms {
				mp := ip + ".method"
				if mn.Kind == yaml.SequenceNode {
					mp = index(mp, j)
				}
				s, ok := l.str(m, mp, "a method such as GET")
				if !ok {
					good = false
					continue
				}
				if s == "*" && len(ms) == 1 {
					break
				}
				valid := false
				for _, v := range validMethods {
					if s == v {
						valid = true
					}
				}
				if !valid {
					l.add(m, mp, "invalid method %q, so the route could never match: want one of %s (upper case), or * for any", s, strings.Join(validMethods, ", "))
					good = false
					continue
				}
				r.Methods = append(r.Methods, s)
			}
		}
		if pn := f["path"]; pn == nil {
			l.add(it, ip+".path", "missing: want a path pattern such as /search/* or /** for every path")
			good = false
		} else if s, ok := l.str(pn, ip+".path", "a path pattern"); ok {
			segs, msg := parsePattern(s)
			if msg != "" {
				l.add(pn, ip+".path", "%s", msg)
				good = false
			} else {
				r.Path, r.segs = s, segs
			}
		} else {
			good = false
		}
		if cn := f["cost"]; cn != nil {
			if v, ok := l.integer(cn, ip+".cost", 1, maxCount); ok {
				r.Cost = v
			} else {
				good = false
			}
		}
		var own []*limitNodes
		if ln := f["limits"]; ln != nil {
			r.Limits, own = l.limits(ln, ip+".limits", bp, names)
		}
		if cn := f["costs"]; cn != nil {
			if r.Costs = l.costs(cn, ip+".costs", base, own); r.Costs == nil {
				good = false
			}
		}
		if sn := f["sync"]; sn != nil {
			if r.Sync = l.sync(sn, ip+".sync", "route "+r.Name+"'s stack", base, own); r.Sync == nil {
				good = false
			}
		}
		if !good {
			continue
		}
		// A route that an earlier one always matches first is dead.
		for j := range seen {
			if methodsCover(seen[j].Methods, r.Methods) && covers(seen[j].segs, r.segs) {
				l.add(it, ip, "route %s can never match: route %s (%s) matches every request it does; put the more specific route first",
					r.Name, seen[j].Name, seen[j].Path)
				good = false
				break
			}
		}
		seen = append(seen, r)
		if len(p.Limits)+len(r.Limits) > maxStack {
			l.add(it, ip+".limits", "%d limits in one stack: at most %d", len(p.Limits)+len(r.Limits), maxStack)
			good = false
		}
		// Every limit of the stack must admit the route's cost.
		for _, lns := range [][]*limitNodes{base, own} {
			for _, ln := range lns {
				q := ln.lim.Quota
				cost, where := r.Cost, ""
				if v, ok := r.Costs[q.Name]; ok {
					cost, where = v, " (its costs entry)"
				}
				if c := q.Capacity(); cost > c && q.Kind != quota.Concurrency { // a request holds one lease
					what := "burst"
					if q.Kind == quota.Window {
						what = "quota"
					}
					hr := ""
					if bp != 10000 {
						hr = fmt.Sprintf(" (after headroom %s)", strconv.FormatFloat(float64(bp)/100, 'f', -1, 64)+"%")
					}
					l.add(ln.capacity, join(ln.path, ln.capField),
						"the %s %d of limit %s%s is below the cost %d of route %s%s, so such a request could never be admitted: raise the %s to at least %d or lower the cost",
						what, c, q.Name, hr, cost, r.Name, where, what, cost)
					good = false
				}
			}
		}
		if good {
			out = append(out, r)
			kept = append(kept, own...)
		}
	}
	return out, kept
}

// costs reads a route's costs: a map from the name of a limit of the
// route's stack to what one request counts for in it.
func (l *loader) costs(n *yaml.Node, path string, stacks ...[]*limitNodes) map[string]int64 {
	if n.Kind != yaml.MappingNode {
		l.add(n, path, "want a map from limit names to costs, e.g. {points: 5}")
		return nil
	}
	out := map[string]int64{}
	ok := true
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		found := false
		for _, lns := range stacks {
			for _, ln := range lns {
				if ln.lim.Quota.Name == k.Value {
					found = true
				}
			}
		}
		if !found {
			l.add(k, join(path, k.Value), "no limit %q in this route's stack: costs names limits of the provider or the route", k.Value)
			ok = false
			continue
		}
		c, good := l.integer(v, join(path, k.Value), 1, maxCount)
		if !good {
			ok = false
			continue
		}
		out[k.Value] = c
	}
	if !ok {
		return nil
	}
	return out
}

// sync reads a sync field: the format of the vendor's counters and a map
// from counter names to the names of limits among stacks (what names the
// limits the field may map to). It returns nil after a problem.
func (l *loader) sync(n *yaml.Node, path, what string, stacks ...[]*limitNodes) *Sync {
	f := l.fields(n, path, "format", "counters")
	if f == nil {
		return nil
	}
	sc := &Sync{}
	ok := true
	if fn := f["format"]; fn == nil {
		l.add(n, path+".format", "missing: want one of %s", formatList())
		ok = false
	} else if s, good := l.str(fn, path+".format", "a counter format"); !good {
		ok = false
	} else if sc.Format, good = parseFormat(s); !good {
		l.add(fn, path+".format", "unknown counter format %q: want one of %s", s, formatList())
		ok = false
	}
	cn := f["counters"]
	switch {
	case cn == nil:
		l.add(n, path+".counters", "missing: want a map from the vendor's counter names to limit names, e.g. {core: core}")
		return nil
	case cn.Kind != yaml.MappingNode:
		l.wrongKind(cn, path+".counters", "a map from the vendor's counter names to limit names, e.g. {core: core}")
		return nil
	case len(cn.Content) == 0:
		l.add(cn, path+".counters", "empty: map at least one of the vendor's counters to a limit")
		return nil
	}
	sc.Counters = make(map[string]string, len(cn.Content)/2)
	for i := 0; i+1 < len(cn.Content); i += 2 {
		k, v := cn.Content[i], cn.Content[i+1]
		kp := join(path+".counters", k.Value)
		if k.Kind != yaml.ScalarNode || k.Value == "" || len(k.Value) > 64 {
			l.add(k, path+".counters", "want a vendor counter name of 1 to 64 characters")
			ok = false
			continue
		}
		if _, dup := sc.Counters[k.Value]; dup {
			l.add(k, kp, "counter %q is mapped twice", k.Value)
			ok = false
			continue
		}
		name, good := l.str(v, kp, "a limit name")
		if !good {
			ok = false
			continue
		}
		var found *Limit
		for _, lns := range stacks {
			for _, ln := range lns {
				if ln.lim.Quota.Name == name {
					found = ln.lim
				}
			}
		}
		if found == nil {
			l.add(v, kp, "no limit %q in %s: sync maps a vendor counter to a limit of it", name, what)
			ok = false
			continue
		}
		if found.Quota.Kind == quota.Rolling {
			l.add(v, kp, "limit %q is a rolling window, which sync cannot drain: map the counter to a GCRA or calendar-window limit", name)
			ok = false
			continue
		}
		sc.Counters[k.Value] = name
	}
	if !ok {
		return nil
	}
	return sc
}

// parseFormat returns the counter format named s.
func parseFormat(s string) (backoff.Format, bool) {
	f, err := backoff.ParseFormat(s)
	return f, err == nil
}

// formatList lists the counter formats' names, for errors.
func formatList() string {
	var names []string
	for f := backoff.Format(1); !strings.HasPrefix(f.String(), "Format("); f++ {
		names = append(names, f.String())
	}
	return strings.Join(names, ", ")
}
