package providers

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"gopkg.in/yaml.v3"
)

// maxFileSize bounds the configuration Load accepts.
const maxFileSize = 4 << 20

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
	plans     planIndex // the tenants map and the plan names: plans.go
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
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, err
	}
	return Load(path, data, opts...)
}

// Load parses and validates a configuration. name is used in error
// messages (usually the file name). Every problem found is reported in one
// *ConfigError, which wraps ErrConfig. A configuration of more than 4 MiB
// is refused.
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

// load decodes a whole configuration. It returns nil when the document
// is not one at all (it could not be parsed, or has no providers).
func (l *loader) load(data []byte) *Config {
	root := l.document(data)
	if root == nil || !l.checkTree(root, "", 0) {
		return nil
	}
	f := l.fields(root, "", "version", "providers", "tenants")
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
	cfg := l.providers(pn)
	if len(cfg.providers) == 0 && len(l.problems) == 0 {
		l.add(pn, "providers", "no providers: want at least one")
	}
	l.tenants(cfg, f["tenants"])
	return cfg
}

// document parses data as one YAML document and returns its root node,
// or nil after a problem that leaves nothing to decode.
func (l *loader) document(data []byte) *yaml.Node {
	if len(data) > maxFileSize {
		l.add(nil, "", "the file is larger than %d bytes", maxFileSize)
		return nil
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			l.add(nil, "", "the file is empty: want a mapping with \"providers\"")
			return nil
		}
		l.problems = append(l.problems, syntaxProblem(l.file, data, err))
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
	return root
}

// hostClaim is the provider that claims a host pattern, and where.
type hostClaim struct {
	p    *Provider
	line int
}

// providers decodes the mapping of provider names to providers, pn, and
// indexes the providers by name and host.
func (l *loader) providers(pn *yaml.Node) *Config {
	cfg := &Config{
		name:   l.file,
		byName: make(map[string]*Provider),
		hosts:  hostIndex{exact: make(map[string]*Provider), wild: make(map[string]*Provider)},
	}
	claims := make(map[string]hostClaim)
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
		l.claimHosts(cfg, claims, p, hostNodes, path)
		cfg.providers = append(cfg.providers, p)
		cfg.byName[p.Name] = p
	}
	return cfg
}

// claimHosts indexes p under each of its hosts (whose nodes are
// hostNodes) in cfg, refusing a host that another provider, or p itself,
// already claims.
func (l *loader) claimHosts(cfg *Config, claims map[string]hostClaim, p *Provider, hostNodes []*yaml.Node, path string) {
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
		claims[key] = hostClaim{p, hostNodes[j].Line}
		if wild {
			cfg.hosts.wild[key] = p
		} else {
			cfg.hosts.exact[key] = p
		}
	}
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
