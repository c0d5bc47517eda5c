package fleet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is one redis-server process on a loopback port, without
// persistence, as a cache-style Redis in production usually is: a restart
// loses every key.
type redisServer struct {
	addr string
	bin  string
	dir  string
	port int
	cmd  *exec.Cmd
	done chan struct{}
	// aof: started (and restarted) with appendonly yes, appendfsync always.
	aof bool
}

// persist turns the append-only file on (every write fsynced) or off, now
// and for restarts.
func (s *redisServer) persist(ctx context.Context, c *redis.Client, on bool) error {
	if s.aof == on {
		return nil
	}
	s.aof = on
	args := [][]any{{"CONFIG", "SET", "appendfsync", "always"}, {"CONFIG", "SET", "appendonly", "yes"}}
	if !on {
		args = [][]any{{"CONFIG", "SET", "appendonly", "no"}}
	}
	for _, a := range args {
		var err error
		for try := 0; try < 3; try++ { // a restart may have left a dead pooled connection
			if err = c.Do(ctx, a...).Err(); err == nil {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("%v: %w", a, err)
		}
	}
	return nil
}

// startRedis starts redis-server (from PATH, then /usr/bin) in dir on a
// free port and waits until it answers PING.
func startRedis(dir string) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if _, serr := os.Stat("/usr/bin/redis-server"); serr != nil {
			return nil, errors.New("redis-server not found: run `make redis` (or apt-get install redis-server)")
		}
		bin = "/usr/bin/redis-server"
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	s := &redisServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), bin: bin, dir: dir, port: port}
	if err := s.start(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *redisServer) start() error {
	aof := []string{"--appendonly", "no"}
	if s.aof {
		aof = []string{"--appendonly", "yes", "--appendfsync", "always"}
	}
	cmd := exec.Command(s.bin, append([]string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--dir", s.dir,
		"--logfile", filepath.Join(s.dir, "redis.log"),
	}, aof...)...)
	// Its own process group: an interrupt of the harness does not reach it
	// before the harness has had a chance to stop it in order.
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting redis-server: %w", err)
	}
	s.cmd = cmd
	s.done = make(chan struct{})
	go func() { _ = cmd.Wait(); close(s.done) }()
	c := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("redis-server exited at start (log: %s)", filepath.Join(s.dir, "redis.log"))
		default:
		}
		if time.Now().After(deadline) {
			s.stop()
			return fmt.Errorf("redis-server on %s did not answer PING: %w", s.addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop kills the server (as a crash would) and waits for it to exit.
func (s *redisServer) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
	}
	s.cmd = nil
}

// restart kills the server, waits down, and starts it again, empty, on the
// same port.
func (s *redisServer) restart(down time.Duration) error {
	s.stop()
	time.Sleep(down)
	return s.start()
}

// redisStats is what INFO says about the work a server has done.
type redisStats struct {
	calls  map[string]int64 // per command
	cpuSec float64          // used_cpu_sys + used_cpu_user
}

func readStats(ctx context.Context, c *redis.Client) (redisStats, error) {
	st := redisStats{calls: map[string]int64{}}
	info, err := c.Info(ctx, "commandstats", "cpu").Result()
	if err != nil {
		return st, err
	}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		name, rest, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(name, "cmdstat_"):
			for _, f := range strings.Split(rest, ",") {
				if v, ok := strings.CutPrefix(f, "calls="); ok {
					n, _ := strconv.ParseInt(v, 10, 64)
					st.calls[strings.TrimPrefix(name, "cmdstat_")] = n
				}
			}
		case name == "used_cpu_sys" || name == "used_cpu_user":
			v, _ := strconv.ParseFloat(rest, 64)
			st.cpuSec += v
		}
	}
	return st, nil
}

// commandsSince counts the commands clients sent since before (sent: a
// script call is one, whatever it runs inside) and the commands the server
// ran (ran: the scripts' inner commands too). The harness's own INFO,
// CLIENT, CONFIG and FLUSHALL, and the workers' warm-up PINGs, are left
// out.
func commandsSince(before, after redisStats) (sent, ran int64) {
	scripts := false
	for k, v := range after.calls {
		if (k == "evalsha" || k == "eval") && v > before.calls[k] {
			scripts = true
		}
	}
	for k, v := range after.calls {
		d := v - before.calls[k]
		if d <= 0 || k == "info" || k == "flushall" || k == "ping" || k == "config" || strings.HasPrefix(k, "client") || strings.HasPrefix(k, "config") {
			continue
		}
		ran += d
		if !scripts || k == "evalsha" || k == "eval" || strings.HasPrefix(k, "script") {
			sent += d
		}
	}
	return sent, ran
}
