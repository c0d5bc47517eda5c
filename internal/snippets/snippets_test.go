package snippets

import (
	"bufio"
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fleetquota/throttle/internal/redistest"
)

// The rules of a document's fenced code blocks:
//
//   - Every block names its language. sh and bash blocks run with bash,
//     python blocks with a python3 that has requests, procfile blocks start
//     each throttle process they list until it listens, then stop it.
//     Blocks in other languages (go, yaml, json, js, ini, text, ...) are
//     not run: the Go ones are fragments with their error checks left
//     out, and the package examples (example_test.go) are the Go that runs.
//   - An HTML comment on the line before a block changes how it runs:
//     "<!-- snippet: skip REASON -->" does not run it (a reason is
//     required, and such blocks are few); "<!-- snippet: syntax -->" only
//     checks its syntax (a fragment that uses a variable of the block
//     above); "<!-- snippet: background ADDR -->" starts it, waits until
//     ADDR accepts connections, and leaves it running for the blocks after
//     it, until the next server starts or the document ends.
//   - Blocks run in document order at the repository root, with throttle
//     (cmd/throttle, built first) on PATH. What a snippet would reach
//     outside this machine is replaced by a stand-in on loopback, by the
//     substitutions below: a redis-server for redis.internal (with a Redis
//     timeout a loaded machine cannot exceed), a free port for the proxy's
//     127.0.0.1:8080, a fake GitHub over TLS for api.github.com (trusted
//     through SSL_CERT_FILE) and a copy of the catalog that says it is
//     GitHub. GITHUB_TOKEN is set.
//   - make only checks that its targets exist (make -n): make test runs
//     this test, and make bench takes minutes.

// docs are the documents whose snippets run, from the repository root.
func docs(t *testing.T, root string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no docs/*.md under %s: %v", root, err)
	}
	return append([]string{filepath.Join(root, "README.md")}, files...)
}

// block is one fenced code block of a document.
type block struct {
	file string
	line int    // of the opening fence, from 1
	lang string // as written after the fence
	text string
	mode string // the snippet annotation's word: "", skip, syntax, background
	arg  string // the rest of the annotation: skip's reason, background's address
}

func (b block) String() string {
	return fmt.Sprintf("%s:%d (%s)", filepath.Base(b.file), b.line, b.lang)
}

var (
	fence      = regexp.MustCompile("^```\\s*([A-Za-z0-9_-]*)\\s*$")
	annotation = regexp.MustCompile(`^<!--\s*snippet:\s*(\S+)\s*(.*?)\s*-->$`)
)

// parse returns the fenced blocks of a document with their annotations.
// A fence is a line of three backquotes at the start of a line, which all
// of this repository's documents use.
func parse(file string, data []byte) ([]block, error) {
	var blocks []block
	var cur *block
	prev := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if cur != nil {
			if strings.TrimSpace(line) == "```" {
				blocks = append(blocks, *cur)
				cur = nil
			} else {
				cur.text += line + "\n"
			}
			continue
		}
		if m := fence.FindStringSubmatch(line); m != nil {
			cur = &block{file: file, line: n, lang: m[1]}
			if a := annotation.FindStringSubmatch(strings.TrimSpace(prev)); a != nil {
				cur.mode, cur.arg = a[1], a[2]
			}
		}
		prev = line
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: the block is never closed", filepath.Base(file), cur.line)
	}
	return blocks, sc.Err()
}

// runnable is whether the runner runs blocks of lang.
func runnable(lang string) bool {
	switch lang {
	case "sh", "bash", "python", "procfile":
		return true
	}
	return false
}

// check reports what is wrong with a block's language and annotation.
func (b block) check() error {
	switch {
	case b.lang == "":
		return fmt.Errorf("%v: a block without a language: name it (sh, python, procfile to run it; text, go, yaml, ... otherwise)", b)
	case b.mode == "":
		return nil
	case !runnable(b.lang):
		return fmt.Errorf("%v: a snippet annotation on a block that is not run", b)
	case b.mode == "skip" && b.arg == "":
		return fmt.Errorf("%v: \"snippet: skip\" needs a reason", b)
	case b.mode == "background" && (b.arg == "" || b.lang == "python" || b.lang == "procfile"):
		return fmt.Errorf("%v: \"snippet: background ADDR\" is for a shell block, with the address it listens on", b)
	case b.mode != "skip" && b.mode != "syntax" && b.mode != "background":
		return fmt.Errorf("%v: unknown snippet annotation %q (want skip, syntax or background)", b, b.mode)
	}
	return nil
}

// TestDocsBlocksAreTagged checks every block's language and annotation
// and that the runner understands its own rules: it needs no Redis,
// network or build, so it reports a bad document at once.
func TestDocsBlocksAreTagged(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	for _, file := range docs(t, root) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := parse(file, data)
		if err != nil {
			t.Error(err)
		}
		for _, b := range blocks {
			if err := b.check(); err != nil {
				t.Error(err)
			}
		}
	}
	bad := "<!-- snippet: skip -->\n```sh\nfalse\n```\n\n```\nuntagged\n```\n<!-- snippet: later -->\n```python\npass\n```\n"
	blocks, err := parse("bad.md", []byte(bad))
	if err != nil || len(blocks) != 3 {
		t.Fatalf("parse = %v, %v; want 3 blocks", blocks, err)
	}
	for _, b := range blocks {
		if b.check() == nil {
			t.Errorf("%v (%s %q): no error", b, b.mode, b.arg)
		}
	}
}

// TestDocsSnippets runs every shell, Python and Procfile snippet of the
// documents, as the rules above say.
func TestDocsSnippets(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	env := newEnv(t, root)
	for _, file := range docs(t, root) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := parse(file, data)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(file), func(t *testing.T) {
			defer env.stopServer(t)
			for _, b := range blocks {
				if !runnable(b.lang) || b.check() != nil {
					continue // TestDocsBlocksAreTagged reports a bad block
				}
				env.run(t, b)
			}
		})
	}
	if env.seen.Load() == 0 {
		t.Error("no snippet reached the fake GitHub through the proxy: the substitutions no longer match what the documents say")
	}
}

// repoRoot is the repository's root: two directories up from this
// package, where go.mod names the library.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !bytes.HasPrefix(mod, []byte("module github.com/fleetquota/throttle\n")) {
		t.Fatalf("%s is not the repository's root: %v", root, err)
	}
	return root
}

// env is what the snippets run with: the stand-ins they reach, the
// substitutions that point them there, and the server left running.
type env struct {
	root    string
	bin     string   // holds throttle; first on PATH; GOBIN
	vars    []string // the snippets' environment
	subst   *strings.Replacer
	python  string
	seen    *atomic.Int64 // requests the fake GitHub answered with 200
	server  *exec.Cmd     // a background block or Procfile process
	output  *bytes.Buffer // the server's
	stopped chan struct{} // closed when server has exited
}

// snippetToken is the GITHUB_TOKEN the snippets send; the fake GitHub
// answers 401 to any other.
const snippetToken = "snippet-token"

func newEnv(t *testing.T, root string) *env {
	t.Helper()
	tmp := t.TempDir()
	e := &env{root: root, bin: filepath.Join(tmp, "bin"), python: python(t), seen: new(atomic.Int64)}

	github := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+snippetToken {
			http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
			return
		}
		e.seen.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"full_name":%q}`, strings.TrimPrefix(r.URL.Path, "/repos/"))
	}))
	t.Cleanup(github.Close)
	certFile := filepath.Join(tmp, "github.pem")
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: github.Certificate().Raw})
	if err := os.WriteFile(certFile, cert, 0o600); err != nil {
		t.Fatal(err)
	}
	gh := strings.TrimPrefix(github.URL, "https://")

	catalog, err := os.ReadFile(filepath.Join(root, "config", "providers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const hosts = "hosts: [api.github.com]"
	if bytes.Count(catalog, []byte(hosts)) != 1 {
		t.Fatalf("config/providers.yaml has no single %q: the fake GitHub cannot stand in", hosts)
	}
	catalogFile := filepath.Join(tmp, "providers.yaml")
	catalog = bytes.Replace(catalog, []byte(hosts), []byte(`hosts: ["`+gh+`"]`), 1)
	if err := os.WriteFile(catalogFile, catalog, 0o600); err != nil {
		t.Fatal(err)
	}

	redis := redistest.Start(t)
	e.subst = strings.NewReplacer(
		// The proxy's Redis timeout is 200 ms by default, which a loaded
		// test machine can exceed on its first ping: one is as much a
		// failure as a snippet that does not work.
		"--redis redis://redis.internal:6379/0", "--redis redis://"+redis.Addr+"/0 --timeout 5s",
		"redis://redis.internal:6379/0", "redis://"+redis.Addr+"/0",
		"127.0.0.1:8080", freeAddr(t),
		"https://api.github.com", github.URL,
		"config/providers.yaml", catalogFile,
	)
	e.vars = append(os.Environ(),
		"PATH="+e.bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"GOBIN="+e.bin,
		"GITHUB_TOKEN="+snippetToken,
		"SSL_CERT_FILE="+certFile,
		"THROTTLE_REDIS=", // every snippet names its Redis
		// Loopback is never sent through a proxy of the machine's.
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost",
	)

	// throttle first: blocks above the one that installs it use it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-C", filepath.Join(root, "cmd", "throttle"),
		"-o", filepath.Join(e.bin, "throttle"), ".")
	build.Env = e.vars
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building throttle: %v\n%s", err, out)
	}
	return e
}

// freeAddr returns a loopback address no one listened on a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// python returns a python3 that can import requests, as the proxy's
// tests find it: the one on PATH, else Debian's.
func python(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(name, "-c", "import requests").Run() == nil {
			return name
		}
	}
	t.Fatal("no python3 can import requests (Debian: apt-get install -y python3-requests; make test installs it when run as root)")
	return ""
}

// shellPrelude comes before every shell snippet.
const shellPrelude = `set -euo pipefail
# make test runs this test, and make bench takes minutes: check that the
# targets exist, and run nothing.
make() { command make --no-print-directory -n "$@" >/dev/null; }
`

// run runs one block as its language and annotation say.
func (e *env) run(t *testing.T, b block) {
	t.Helper()
	text := e.subst.Replace(b.text)
	switch {
	case b.mode == "skip":
		t.Logf("%v: skipped: %s", b, b.arg)
	case b.lang == "procfile":
		e.procfile(t, b, text)
	case b.mode == "background":
		e.startServer(t, b, exec.Command("bash", "-c", shellPrelude+text), e.subst.Replace(b.arg))
	case b.lang == "python" && b.mode == "syntax":
		e.runSnippet(t, b, text, e.python, "-c", "import ast, sys; ast.parse(sys.stdin.read())")
	case b.lang == "python":
		e.runSnippet(t, b, text, e.python, "-")
	case b.mode == "syntax":
		e.runSnippet(t, b, text, "bash", "-n")
	default:
		e.runSnippet(t, b, "", "bash", "-c", shellPrelude+text)
	}
}

// runSnippet runs name with args and stdin at the repository root, in a
// process group of its own that a timeout (room for a cold compile) kills
// whole, and fails the test unless it succeeds.
func (e *env) runSnippet(t *testing.T, b block, stdin, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = e.root, e.vars
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Errorf("%v: %v\n--- snippet\n%s--- output\n%s", b, err, b.text, out.String())
	}
}

// procfile starts each throttle process of a Procfile until it listens
// on its --listen address, then stops it; other processes (the app's) are
// not this repository's to run.
func (e *env) procfile(t *testing.T, b block, text string) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		name, cmdline, ok := strings.Cut(line, ":")
		fields := strings.Fields(cmdline)
		if !ok || len(fields) == 0 {
			t.Errorf("%v: %q is not a Procfile line (name: command)", b, line)
			continue
		}
		if fields[0] != "throttle" {
			continue
		}
		addr := ""
		for i, f := range fields {
			if f == "--listen" && i+1 < len(fields) {
				addr = fields[i+1]
			}
		}
		if addr == "" {
			t.Errorf("%v: process %s has no --listen ADDR to wait for", b, name)
			continue
		}
		e.startServer(t, b, exec.Command("bash", "-c", "exec "+cmdline), addr)
		e.stopServer(t)
	}
}

// startServer starts cmd (after stopping the server before it) and waits
// until addr accepts connections; the test fails if it exits first.
func (e *env) startServer(t *testing.T, b block, cmd *exec.Cmd, addr string) {
	t.Helper()
	e.stopServer(t)
	cmd.Dir, cmd.Env = e.root, e.vars
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("%v: %v", b, err)
	}
	stopped := make(chan struct{})
	go func() { _ = cmd.Wait(); close(stopped) }()
	e.server, e.output, e.stopped = cmd, out, stopped
	deadline := time.Now().Add(3 * time.Minute) // room for a cold compile
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return
		}
		select {
		case <-stopped:
			e.server = nil
			t.Fatalf("%v: exited before listening on %s\n--- snippet\n%s--- output\n%s", b, addr, b.text, out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			e.stopServer(t)
			t.Fatalf("%v: not listening on %s after 3 minutes\n--- output\n%s", b, addr, out.String())
		}
	}
}

// stopServer stops the server left running, if any: SIGTERM to its
// process group (the proxy drains, with nothing in flight), SIGKILL if it
// is still there after 30 s, time enough on a loaded machine.
func (e *env) stopServer(t *testing.T) {
	t.Helper()
	if e.server == nil {
		return
	}
	pgid := -e.server.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case <-e.stopped:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		<-e.stopped
		t.Errorf("a server of the snippets did not stop on SIGTERM\n%s", e.output.String())
	}
	e.server = nil
}
