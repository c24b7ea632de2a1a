package service_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/redisstore"
	"github.com/admit-dev/admit/service"
)

// replicatedRequest returns a primary with one replica, whose replication stream reaches it lag
// late (a redistest.Proxy between them), a Store and a Service on it, and the Items of requests of
// three replicated policies in three hash slots, of 4,096 subjects.
func replicatedRequest(b *testing.B, lag time.Duration) (*redistest.Server, *redisstore.Store, *service.Service, [][]service.Item) {
	primary := redistest.Start(b, "--repl-diskless-sync-delay", "0")
	proxy := redistest.NewProxy(b, primary.Addr())
	proxy.SetLatency(lag)
	host, port, _ := strings.Cut(proxy.Addr(), ":")
	redistest.Start(b, "--replicaof", host, port)
	deadline := time.Now().Add(time.Minute)
	for {
		info, _ := primary.Do(b, "INFO", "replication").ToString()
		if strings.Contains(info, "state=online") {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the replica is not online within a minute:\n%s", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
	store, err := redisstore.New(redisstore.Config{URL: primary.URL(), CommandTimeout: 2 * time.Second, DialTimeout: 2 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	keys, err := admit.NewKeyBuilder([]byte(testSecret))
	if err != nil {
		b.Fatal(err)
	}
	s, err := service.New(store, keys, &policy.Config{})
	if err != nil {
		b.Fatal(err)
	}
	lim := admit.Limit{Name: "payment", Algorithm: admit.FixedWindow, Rate: 1 << 40, Period: time.Hour, Replicas: 1}
	reqs := make([][]service.Item, 4096)
	for i := range reqs {
		reqs[i] = make([]service.Item, 3)
		for j := range reqs[i] {
			reqs[i][j] = service.Item{Limit: lim, Version: "1", Subject: admit.Subject{ID: fmt.Sprintf("subject-%d", i), Slot: fmt.Sprint(j)}, Cost: 1}
		}
	}
	return primary, store, s, reqs
}

// replicaLags are the replication delays the ReplicatedRequest benchmarks run at: none (loopback)
// and a replica 2 ms away.
var replicaLags = []time.Duration{0, 2 * time.Millisecond}

// BenchmarkReplicatedRequest_OneWait measures DecideItems of three replicated policies in three
// hash slots, decided Separately (an Envoy domain that is not atomic), from 1 caller, on a primary
// with one replica lag away: three scripts on one dedicated connection, then one WAIT.
func BenchmarkReplicatedRequest_OneWait(b *testing.B) {
	for _, lag := range replicaLags {
		b.Run(fmt.Sprintf("lag=%v", lag), func(b *testing.B) { benchOneWait(b, lag) })
	}
}

func benchOneWait(b *testing.B, lag time.Duration) {
	primary, _, s, reqs := replicatedRequest(b, lag)
	ctx := b.Context()
	ds := make([]admit.Decision, 3)
	waits := primary.CommandCalls(b, "wait")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := s.DecideItems(ctx, reqs[i%len(reqs)], ds, service.Separately); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(primary.CommandCalls(b, "wait")-waits)/float64(i), "waits/op")
}

// BenchmarkReplicatedRequest_ReferenceWaitPerCall is the same three policies as three replicated
// TakeAll calls of the Store, each waiting for its replica on its own (a request's cost before one
// wait covered it).
func BenchmarkReplicatedRequest_ReferenceWaitPerCall(b *testing.B) {
	for _, lag := range replicaLags {
		b.Run(fmt.Sprintf("lag=%v", lag), func(b *testing.B) { benchWaitPerCall(b, lag) })
	}
}

func benchWaitPerCall(b *testing.B, lag time.Duration) {
	primary, store, _, reqs := replicatedRequest(b, lag)
	keys, err := admit.NewKeyBuilder([]byte(testSecret))
	if err != nil {
		b.Fatal(err)
	}
	rs := make([][]admit.Request, len(reqs))
	for i, items := range reqs {
		rs[i] = make([]admit.Request, len(items))
		for j, it := range items {
			k, err := keys.Key(it.Limit, it.Version, it.Subject)
			if err != nil {
				b.Fatal(err)
			}
			rs[i][j] = admit.Request{Key: k, Limit: it.Limit, Cost: 1}
		}
	}
	ctx := b.Context()
	ds := make([]admit.Decision, 1)
	waits := primary.CommandCalls(b, "wait")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r := rs[i%len(rs)]
		for j := range r {
			if _, err := store.TakeAll(ctx, r[j:j+1], ds); err != nil {
				b.Fatal(err)
			}
		}
		i++
	}
	b.ReportMetric(float64(primary.CommandCalls(b, "wait")-waits)/float64(i), "waits/op")
}
