package redistest

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterSize is the number of masters StartCluster starts. Three is the
// smallest cluster redis-cli accepts and enough to spread slots.
const clusterSize = 3

// clusterReadyTimeout bounds how long the masters may take to agree on the
// slot map after CLUSTER MEET.
const clusterReadyTimeout = 30 * time.Second

// Cluster is a running Redis Cluster of three masters, no replicas, on
// loopback ports. Slots are split evenly: 0-5460, 5461-10922, 10923-16383.
type Cluster struct {
	// Addrs are the masters' "127.0.0.1:port" addresses, in slot order.
	Addrs []string

	servers []*Server
}

// StartCluster starts three redis-server processes in cluster mode, assigns
// every slot, joins them, and waits until every node reports
// cluster_state:ok and every node sees the same slot map. The processes are
// stopped by tb.Cleanup.
func StartCluster(tb testing.TB) *Cluster {
	tb.Helper()
	c := &Cluster{}
	for i := 0; i < clusterSize; i++ {
		var bus int
		s := start(tb, func(dir string) ([]string, error) {
			// The cluster bus port defaults to port+10000, which may be
			// taken or out of range; pick it explicitly.
			var err error
			bus, err = freePort()
			if err != nil {
				return nil, fmt.Errorf("picking a free cluster bus port: %w", err)
			}
			return []string{
				"--cluster-enabled", "yes",
				"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
				"--cluster-port", strconv.Itoa(bus),
				"--cluster-node-timeout", "5000",
			}, nil
		})
		s.busPort = bus
		c.servers = append(c.servers, s)
		c.Addrs = append(c.Addrs, s.Addr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout)
	defer cancel()

	nodes := make([]*redis.Client, clusterSize)
	for i, addr := range c.Addrs {
		nodes[i] = redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
		defer nodes[i].Close()
	}
	want := make([]slotRange, clusterSize)
	for i, n := range nodes {
		lo, hi := slotBounds(i)
		want[i] = slotRange{Start: lo, End: hi, Addr: c.Addrs[i]}
		// Distinct config epochs, as redis-cli --cluster create sets them,
		// so the nodes need not resolve an epoch collision first.
		if err := n.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			tb.Fatalf("redistest: CLUSTER SET-CONFIG-EPOCH on %s: %v", c.Addrs[i], err)
		}
		if err := n.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			tb.Fatalf("redistest: CLUSTER ADDSLOTSRANGE %d %d on %s: %v", lo, hi, c.Addrs[i], err)
		}
	}
	for i := 1; i < clusterSize; i++ {
		s := c.servers[i]
		// The bus port must be given: MEET otherwise assumes port+10000.
		if err := nodes[0].Do(ctx, "CLUSTER", "MEET", "127.0.0.1", s.port, s.busPort).Err(); err != nil {
			tb.Fatalf("redistest: CLUSTER MEET %s from %s: %v", s.Addr, c.Addrs[0], err)
		}
	}

	var lastErr error
	for {
		if lastErr = clusterAgrees(ctx, nodes, c.Addrs, want); lastErr == nil {
			return c
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("redistest: cluster %v not ready within %v: %v", c.Addrs, clusterReadyTimeout, lastErr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Client returns a new go-redis cluster client for the cluster. It is closed
// when the test ends.
func (c *Cluster) Client(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
	tb.Cleanup(func() { _ = cc.Close() })
	return cc
}

// slotBounds returns the slot range of master i, split as redis-cli does.
func slotBounds(i int) (lo, hi int) {
	const slots = 16384
	lo = i * slots / clusterSize
	hi = (i+1)*slots/clusterSize - 1
	return lo, hi
}

type slotRange struct {
	Start, End int
	Addr       string
}

// clusterAgrees reports nil when every node says cluster_state:ok, knows all
// nodes, sees every master online, and its CLUSTER SHARDS slot map equals
// want.
func clusterAgrees(ctx context.Context, nodes []*redis.Client, addrs []string, want []slotRange) error {
	for i, n := range nodes {
		info, err := n.ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Errorf("CLUSTER INFO on %s: %w", addrs[i], err)
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("%s: cluster_state is not ok", addrs[i])
		}
		if !strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(nodes))+"\r") {
			return fmt.Errorf("%s does not know all %d nodes yet", addrs[i], len(nodes))
		}
		shards, err := n.ClusterShards(ctx).Result()
		if err != nil {
			return fmt.Errorf("CLUSTER SHARDS on %s: %w", addrs[i], err)
		}
		var got []slotRange
		for _, sh := range shards {
			var master *redis.Node
			for j := range sh.Nodes {
				if sh.Nodes[j].Role == "master" {
					master = &sh.Nodes[j]
				}
			}
			if master == nil {
				return fmt.Errorf("%s sees a shard with no master: %+v", addrs[i], sh)
			}
			if master.Health != "online" {
				return fmt.Errorf("%s sees %s:%d as %s", addrs[i], master.IP, master.Port, master.Health)
			}
			addr := net.JoinHostPort(master.IP, strconv.FormatInt(master.Port, 10))
			for _, r := range sh.Slots {
				got = append(got, slotRange{Start: int(r.Start), End: int(r.End), Addr: addr})
			}
		}
		sort.Slice(got, func(a, b int) bool { return got[a].Start < got[b].Start })
		if !reflect.DeepEqual(got, want) {
			return fmt.Errorf("%s sees slot map %v, want %v", addrs[i], got, want)
		}
	}
	return nil
}
