// Package redistest starts real redis-server processes on loopback ports for
// tests: a single server (Start) and a three-master Redis Cluster
// (StartCluster). Nothing is faked; the redis-server binary is taken from
// PATH.
//
// Every server runs without persistence in a directory from tb.TempDir, is
// stopped by tb.Cleanup, and writes its log to a file whose tail is included
// in the failure message when it does not come up.
package redistest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// readyTimeout bounds how long a started server may take to answer PING.
	readyTimeout = 15 * time.Second
	// stopTimeout bounds how long a killed server may take to exit.
	stopTimeout = 10 * time.Second
	// startAttempts is how many fresh ports Start tries when a port it
	// picked was taken by someone else before redis-server could bind it.
	startAttempts = 5
	// logTail is how many bytes of the server log a failure message shows.
	logTail = 4096
)

const notFoundMsg = "redis-server not found in PATH: install it with `apt-get install redis-server` (make test does this when run as root)"

// Server is one running redis-server process listening on 127.0.0.1.
type Server struct {
	// Addr is the server's "127.0.0.1:port" address. It does not change
	// across Stop and Restart.
	Addr string

	bin     string
	dir     string
	port    int
	busPort int      // cluster bus port; 0 outside a cluster
	extra   []string // extra command-line arguments, e.g. cluster mode

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when cmd has exited
	logPath string
	starts  int
}

// Start starts a fresh redis-server on a free loopback port, waits until it
// answers PING and registers tb.Cleanup to stop it. It fails the test if
// redis-server is not installed or does not come up.
func Start(tb testing.TB) *Server {
	tb.Helper()
	return start(tb, nil)
}

// StartWith is Start with extra redis-server command-line arguments, each
// option and value its own element, e.g. "--maxmemory-policy",
// "allkeys-lru" or "--rename-command", "CONFIG", "" (a server without
// CONFIG, as managed services run it). Restart keeps them.
func StartWith(tb testing.TB, args ...string) *Server {
	tb.Helper()
	args = append([]string(nil), args...)
	return start(tb, func(string) ([]string, error) { return args, nil })
}

func start(tb testing.TB, extra func(dir string) ([]string, error)) *Server {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Fatal(notFoundMsg)
	}
	dir := tb.TempDir()
	var lastErr error
	for attempt := 0; attempt < startAttempts; attempt++ {
		port, err := freePort()
		if err != nil {
			tb.Fatalf("redistest: picking a free port: %v", err)
		}
		s := &Server{
			Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			bin:  bin,
			dir:  dir,
			port: port,
		}
		if extra != nil {
			s.extra, err = extra(dir)
			if err != nil {
				tb.Fatalf("redistest: %v", err)
			}
		}
		if err := s.run(); err != nil {
			lastErr = err
			if errors.Is(err, errExited) {
				// Most likely the port was taken between freePort and
				// the bind; try another one.
				continue
			}
			tb.Fatalf("redistest: %v", err)
		}
		tb.Cleanup(func() {
			if err := s.stop(); err != nil {
				tb.Errorf("redistest: stopping redis-server on %s: %v", s.Addr, err)
			}
		})
		return s
	}
	tb.Fatalf("redistest: redis-server did not start after %d attempts: %v", startAttempts, lastErr)
	return nil
}

// Client returns a new go-redis client connected to the server. It is closed
// when the test ends.
func (s *Server) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Stop kills the server process and waits for it to exit. Clients see the
// connection drop as they would if Redis crashed. Stopping a stopped server
// does nothing.
func (s *Server) Stop(tb testing.TB) {
	tb.Helper()
	if err := s.stop(); err != nil {
		tb.Fatalf("redistest: stopping redis-server on %s: %v", s.Addr, err)
	}
}

// Restart starts the server again on the same port, with an empty data set,
// and waits until it answers PING. A running server is stopped first.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	if err := s.stop(); err != nil {
		tb.Fatalf("redistest: stopping redis-server on %s: %v", s.Addr, err)
	}
	var err error
	// The port was ours a moment ago; a few retries cover a slow release.
	for attempt := 0; attempt < startAttempts; attempt++ {
		if err = s.run(); err == nil {
			return
		}
		if !errors.Is(err, errExited) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	tb.Fatalf("redistest: restarting redis-server on %s: %v", s.Addr, err)
}

var errExited = errors.New("redis-server exited before it was ready")

// run starts the process and waits until it answers PING. On failure the
// process is gone and the error carries the tail of its log.
func (s *Server) run() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return fmt.Errorf("redis-server on %s is already running", s.Addr)
	}
	s.starts++
	s.logPath = filepath.Join(s.dir, fmt.Sprintf("redis-%d.log", s.starts))
	logFile, err := os.Create(s.logPath)
	if err != nil {
		return err
	}
	// The child writes to the file directly: no copying goroutines.
	defer logFile.Close()

	args := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--logfile", "",
	}
	args = append(args, s.extra...)
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()

	if err := waitReady(s.Addr, done); err != nil {
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("%w\n--- redis-server log (%s) ---\n%s", err, s.logPath, tail(s.logPath))
	}
	s.cmd = cmd
	s.done = done
	return nil
}

func (s *Server) stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	cmd, done := s.cmd, s.done
	s.cmd, s.done = nil, nil
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-done:
		return nil
	case <-time.After(stopTimeout):
		return fmt.Errorf("process %d did not exit within %v", cmd.Process.Pid, stopTimeout)
	}
}

// waitReady polls addr with PING until it answers +PONG, the process exits
// (done is closed) or readyTimeout passes.
func waitReady(addr string, done <-chan struct{}) error {
	deadline := time.Now().Add(readyTimeout)
	var lastErr error
	for {
		select {
		case <-done:
			return errExited
		default:
		}
		if lastErr = ping(addr); lastErr == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s did not answer PING within %v: %v", addr, readyTimeout, lastErr)
		}
		select {
		case <-done:
			return errExited
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func ping(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return err
	}
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line = strings.TrimSpace(line); line != "+PONG" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// freePort returns a loopback TCP port that was free a moment ago. Callers
// must cope with it being taken before they bind it.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, err
	}
	return port, nil
}

func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(reading log: %v)", err)
	}
	if len(b) > logTail {
		b = b[len(b)-logTail:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}
