package envoyrl

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/envoyproxy/ratelimit/src/config"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/policy/envoyconf"
)

// seedEnv names the environment variable that sets the seed of the random sequences, to run a
// failed run's again; by default each run has a seed of its own.
const seedEnv = "ADMIT_ORACLE_SEED"

// callTimeout bounds one ShouldRateLimit: patient, as the tests compare answers, not latency.
const callTimeout = 10 * time.Second

// maxWhat is the most of a request a failure prints, in bytes: the requests of boundaries are
// megabytes long.
const maxWhat = 2000

// boundaryMargin is how near the end of an hour a step is not sent: it waits for the next hour,
// so that both services count a step in the same window whatever the machine's delays.
const boundaryMargin = 5 * time.Second

// integrationFiles returns the configuration of envoyproxy/ratelimit's integration test (its
// runtime directory's basic.yaml and another.yaml) with its second and minute units made hours, so
// that its sequences count in one window on a busy machine.
func integrationFiles(t *testing.T) map[string]string {
	t.Helper()
	dir := filepath.Join(referenceDir(t), "test/integration/runtime/current/ratelimit/config")
	files := map[string]string{}
	for _, name := range []string{"basic.yaml", "another.yaml"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		s := strings.NewReplacer("unit: second", "unit: hour", "unit: minute", "unit: hour").Replace(string(data))
		files[name] = s
	}
	return files
}

// A node is a descriptor of a generated configuration.
type node struct {
	key, value string // value "" for a key alone; with a '*' for a wildcard
	children   []*node
}

// generator makes random configurations and requests, from its seed.
type generator struct {
	r     *rand.Rand
	names []string // the rule names given so far
}

// tree returns a random list of descriptors of depth at most depth, written as YAML at indent.
func (g *generator) tree(b *strings.Builder, indent string, depth int) []*node {
	var nodes []*node
	used := map[string]bool{}
	for range 1 + g.r.IntN(4) {
		n := &node{key: []string{"k0", "k1", "k2"}[g.r.IntN(3)]}
		switch g.r.IntN(10) {
		case 0, 1, 2:
		case 3, 4, 5:
			n.value = []string{"v0", "v1"}[g.r.IntN(2)]
		case 6, 7:
			n.value = []string{"w*", "wa*"}[g.r.IntN(2)]
		case 8:
			n.value = "m*z"
		default:
			n.value = "*"
		}
		if used[n.key+"_"+n.value] {
			continue
		}
		used[n.key+"_"+n.value] = true
		fmt.Fprintf(b, "%s- key: %s\n", indent, n.key)
		if n.value != "" {
			fmt.Fprintf(b, "%s  value: %q\n", indent, n.value)
		}
		hasChildren := depth > 1 && g.r.IntN(10) < 4
		if !hasChildren || g.r.IntN(10) < 7 {
			g.rateLimit(b, indent+"  ")
		}
		if hasChildren {
			fmt.Fprintf(b, "%s  descriptors:\n", indent)
			n.children = g.tree(b, indent+"    ", depth-1)
		}
		nodes = append(nodes, n)
	}
	return nodes
}

// rateLimit writes a random rate_limit (and shadow_mode) at indent.
func (g *generator) rateLimit(b *strings.Builder, indent string) {
	fmt.Fprintf(b, "%srate_limit:\n", indent)
	if g.r.IntN(8) == 0 {
		fmt.Fprintf(b, "%s  unlimited: true\n", indent)
	} else {
		fmt.Fprintf(b, "%s  unit: %s\n%s  requests_per_unit: %d\n", indent, []string{"hour", "day", "HOUR"}[g.r.IntN(3)], indent, g.r.IntN(7))
	}
	if g.r.IntN(10) < 3 {
		name := fmt.Sprintf("r%d", len(g.names))
		fmt.Fprintf(b, "%s  name: %s\n", indent, name)
		if len(g.names) > 0 && g.r.IntN(2) == 0 {
			fmt.Fprintf(b, "%s  replaces:\n%s    - name: %s\n", indent, indent, g.names[g.r.IntN(len(g.names))])
		}
		g.names = append(g.names, name)
	}
	if g.r.IntN(8) == 0 {
		fmt.Fprintf(b, "%sshadow_mode: true\n", indent)
	}
}

// config returns a random configuration file of domain and its descriptors.
func (g *generator) config(domain string) (string, []*node) {
	var b strings.Builder
	fmt.Fprintf(&b, "domain: %s\ndescriptors:\n", domain)
	nodes := g.tree(&b, "  ", 3)
	return b.String(), nodes
}

// valueFor returns a value a request sends for the node n: its own, one its wildcard matches (or
// nearly does), or one of a few for a key alone, so that counters fill.
func (g *generator) valueFor(n *node) string {
	switch n.value {
	case "":
		return []string{"x", "y", "z"}[g.r.IntN(3)]
	case "w*", "wa*":
		return []string{"w", "wa", "wab", "wb", "x"}[g.r.IntN(5)]
	case "m*z":
		return []string{"mz", "maz", "mbz", "ma"}[g.r.IntN(4)]
	case "*":
		return []string{"x", "any"}[g.r.IntN(2)]
	}
	if g.r.IntN(8) == 0 {
		return n.value + "x"
	}
	return n.value
}

// descriptor returns a random descriptor walking the tree nodes.
func (g *generator) descriptor(nodes []*node) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for len(nodes) > 0 {
		if g.r.IntN(12) == 0 {
			d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: "unknown", Value: "u"})
			break
		}
		n := nodes[g.r.IntN(len(nodes))]
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: n.key, Value: g.valueFor(n)})
		if g.r.IntN(10) < 4 {
			break
		}
		nodes = n.children
	}
	switch g.r.IntN(10) {
	case 0:
		d.HitsAddend = wrapperspb.UInt64(uint64(g.r.IntN(4)))
	case 1:
		d.HitsAddend = wrapperspb.UInt64(uint64(1 + g.r.IntN(3)))
	}
	if g.r.IntN(12) == 0 {
		d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{
			RequestsPerUnit: uint32(1 + g.r.IntN(6)),
			Unit:            []typev3.RateLimitUnit{typev3.RateLimitUnit_HOUR, typev3.RateLimitUnit_DAY}[g.r.IntN(2)],
		}
	}
	return d
}

// request returns a random request of domain over the tree nodes.
func (g *generator) request(domain string, nodes []*node) *rlsv3.RateLimitRequest {
	req := &rlsv3.RateLimitRequest{Domain: domain, HitsAddend: uint32([]int{0, 0, 1, 1, 2, 3}[g.r.IntN(6)])}
	for range 1 + g.r.IntN(3) {
		req.Descriptors = append(req.Descriptors, g.descriptor(nodes))
	}
	return req
}

// An oracle sends requests to envoyproxy/ratelimit and admit and compares the answers.
type oracle struct {
	t        *testing.T
	ref, adm *service
	cfg      config.RateLimitConfig // envoyproxy/ratelimit's loader's view of the configuration
	seen     *sightings
	allowed  []string // the differences allowed in this run
	// increment is admit's --envoy-increment-over-limit: a rejected hit fills what was left of
	// its limit, as envoyproxy/ratelimit counts it, and "rejected hits counted" is not allowed.
	increment bool
	counters  map[string]*counter // by counterKey, what each service counted
	compared  int                 // statuses compared
	limited   int                 // of them, with a current_limit in both
	over      int                 // of them, OVER_LIMIT in both
}

// A counter is what each service counted of one counter key, by the hits of the statuses with a
// current_limit: envoyproxy/ratelimit counts every hit, admit those that fit under the current
// limit (a descriptor in shadow_mode answers OK either way), and with --envoy-increment-over-limit
// fills the limit when hits do not fit. Once they differ, an allowed difference explains the answers of the key that differ: the
// one that made them differ.
type counter struct {
	reference, admit uint64
	why              string // the difference that made them differ, or ""
}

// newOracle starts both services on files, admit with --envoy-increment-over-limit when increment,
// allowing the differences allowed.
func newOracle(t *testing.T, files map[string]string, seen *sightings, increment bool, allowed ...string) *oracle {
	t.Helper()
	var fs []envoyconf.File
	for name, content := range files {
		fs = append(fs, envoyconf.File{Name: name, Data: []byte(content)})
	}
	cfg, err := referenceLoad(fs)
	if err != nil {
		t.Fatalf("envoyproxy/ratelimit's loader refuses the test's configuration: %v", err)
	}
	o := &oracle{t: t, cfg: cfg, seen: seen, allowed: allowed, increment: increment, counters: map[string]*counter{}}
	refRedis, admRedis := redistest.Start(t), redistest.Start(t)
	done := make(chan struct{})
	go func() { // build and start the reference while admit builds and starts
		defer close(done)
		o.ref = startReference(t, refRedis, files, "oracle")
	}()
	var args []string
	if increment {
		args = append(args, "--envoy-increment-over-limit")
	}
	o.adm = startAdmit(t, admRedis, files, "oracle", args...)
	<-done
	if o.ref == nil { // startReference failed the test, in its goroutine
		t.FailNow()
	}
	return o
}

// counterKey names the counter a descriptor of domain counts in, as both services keep one: its
// entries and the unit of the limit that applies.
func counterKey(domain string, d *ratelimitv3.RateLimitDescriptor, unit string) string {
	var b strings.Builder
	b.WriteString(domain)
	for _, e := range d.GetEntries() {
		fmt.Fprintf(&b, "|%q=%q", e.GetKey(), e.GetValue())
	}
	return b.String() + "|" + unit
}

// waitOutHour sleeps past the end of the hour when it is less than boundaryMargin away, and then
// forgets the counters: both services start new windows.
func (o *oracle) waitOutHour() {
	now := time.Now()
	end := now.Truncate(time.Hour).Add(time.Hour)
	if end.Sub(now) > boundaryMargin {
		return
	}
	o.t.Logf("waiting %v for the next hour, so that both services count in one window", end.Sub(now)+time.Second)
	for time.Now().Before(end.Add(time.Second)) {
		time.Sleep(time.Until(end.Add(time.Second)))
	}
	clear(o.counters)
}

// step sends req to both services and compares the answers.
func (o *oracle) step(req *rlsv3.RateLimitRequest) {
	t := o.t
	t.Helper()
	o.waitOutHour()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	refResp, refErr := o.ref.client.ShouldRateLimit(ctx, req)
	admResp, admErr := o.adm.client.ShouldRateLimit(ctx, req)
	elapsed := time.Since(start)
	if start.Truncate(time.Hour) != time.Now().Truncate(time.Hour) {
		t.Logf("a step took %v over the end of an hour: not compared, the counters forgotten", elapsed)
		clear(o.counters)
		return
	}
	what := prototext.MarshalOptions{}.Format(req)
	if len(what) > maxWhat {
		what = fmt.Sprintf("%s… (%d bytes in all)", what[:maxWhat], len(what))
	}
	if refErr != nil || admErr != nil {
		if status.Code(refErr) != status.Code(admErr) {
			t.Errorf("request %s: envoyproxy/ratelimit: %v; admit: %v", what, refErr, admErr)
		}
		return
	}
	if len(refResp.GetStatuses()) != len(admResp.GetStatuses()) {
		t.Errorf("request %s: %d statuses from envoyproxy/ratelimit, %d from admit", what, len(refResp.GetStatuses()), len(admResp.GetStatuses()))
		return
	}
	explained := false
	for i, d := range req.GetDescriptors() {
		rs, as := refResp.GetStatuses()[i], admResp.GetStatuses()[i]
		o.compared++
		if rs.GetCurrentLimit() != nil && as.GetCurrentLimit() != nil {
			o.limited++
		}
		if rs.GetCode() == rlsv3.RateLimitResponse_OVER_LIMIT && as.GetCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
			o.over++
		}
		refKey := counterKey(req.GetDomain(), d, rs.GetCurrentLimit().GetUnit().String())
		admKey := counterKey(req.GetDomain(), d, as.GetCurrentLimit().GetUnit().String())
		adm := as
		as = o.allow(req, d, rs, as, admKey)
		name := ""
		if diff := o.compareStatus(rs, as, elapsed); diff != "" {
			if name = o.explain(req, d, rs, as, refKey, admKey, elapsed); name == "" {
				t.Errorf("request %s: descriptor %d: %s\nenvoyproxy/ratelimit: %v\nadmit: %v\ncounted before: %s", what, i, diff, rs, as, o.describeCounters(refKey, admKey))
			} else {
				explained = true
				o.saw(name)
			}
		}
		o.count(req, d, rs, adm, refKey, admKey, name)
	}
	if refResp.GetOverallCode() != admResp.GetOverallCode() && !explained {
		t.Errorf("request %s: overall_code %v from envoyproxy/ratelimit, %v from admit", what, refResp.GetOverallCode(), admResp.GetOverallCode())
	}
}

// compareStatus returns how the statuses rs (envoyproxy/ratelimit's) and as (admit's) differ, or
// "": code, current_limit and limit_remaining exactly, duration_until_reset within elapsed and a
// second (envoyproxy/ratelimit's is in whole seconds).
func (o *oracle) compareStatus(rs, as *rlsv3.RateLimitResponse_DescriptorStatus, elapsed time.Duration) string {
	var diffs []string
	if rs.GetCode() != as.GetCode() {
		diffs = append(diffs, "code")
	}
	if !proto.Equal(rs.GetCurrentLimit(), as.GetCurrentLimit()) {
		diffs = append(diffs, "current_limit")
	}
	if rs.GetLimitRemaining() != as.GetLimitRemaining() {
		diffs = append(diffs, "limit_remaining")
	}
	switch rd, ad := rs.GetDurationUntilReset(), as.GetDurationUntilReset(); {
	case (rd == nil) != (ad == nil):
		diffs = append(diffs, "duration_until_reset")
	case rd != nil:
		if gap := rd.AsDuration() - ad.AsDuration(); gap.Abs() > elapsed+time.Second {
			diffs = append(diffs, fmt.Sprintf("duration_until_reset (%v apart, %v allowed)", gap, elapsed+time.Second))
		}
	}
	return strings.Join(diffs, ", ")
}

// allow returns admit's status as with the parts an allowed difference explains set to
// envoyproxy/ratelimit's status rs, recording each difference, for descriptor d of req, whose
// counter in admit is admKey: admit's over (its counter and the hits above its current limit)
// answers what is left, uncounted (exactly the limit less the counter), where envoyproxy/ratelimit
// answers 0; and a duration_until_reset of 0.
func (o *oracle) allow(req *rlsv3.RateLimitRequest, d *ratelimitv3.RateLimitDescriptor, rs, as *rlsv3.RateLimitResponse_DescriptorStatus, admKey string) *rlsv3.RateLimitResponse_DescriptorStatus {
	as = proto.CloneOf(as)
	if as.GetCurrentLimit() == nil || o.increment {
		return as
	}
	_, ha := hits(req, d)
	var used uint64
	if c := o.counters[admKey]; c != nil {
		used = c.admit
	}
	limit := uint64(as.GetCurrentLimit().GetRequestsPerUnit())
	if used+ha <= limit {
		return as // fits in admit
	}
	if left := uint64(as.GetLimitRemaining()); rs.GetLimitRemaining() == 0 && left > 0 && used+left == limit {
		o.saw("rejected hits counted")
		as.LimitRemaining = 0
	}
	return as
}

// hits returns the hits descriptor d of req asks for, as envoyproxy/ratelimit counts them
// (reference) and as admit does: its own hits_addend if set, else the request's; the request's 0
// is 1 in both, the descriptor's 0 is 0 in both (a check that counts nothing).
func hits(req *rlsv3.RateLimitRequest, d *ratelimitv3.RateLimitDescriptor) (reference, admit uint64) {
	if h := d.GetHitsAddend(); h != nil {
		return h.GetValue(), h.GetValue()
	}
	h := max(uint64(req.GetHitsAddend()), 1)
	return h, h
}

// count adds the hits of descriptor d to its counters, as each service's status says it counted
// them, and remembers why (the difference name of the step, if any) when they come to differ.
func (o *oracle) count(req *rlsv3.RateLimitRequest, d *ratelimitv3.RateLimitDescriptor, rs, as *rlsv3.RateLimitResponse_DescriptorStatus, refKey, admKey, name string) {
	get := func(key string) *counter {
		c := o.counters[key]
		if c == nil {
			c = &counter{}
			o.counters[key] = c
		}
		return c
	}
	hr, ha := hits(req, d)
	if rs.GetCurrentLimit() != nil {
		get(refKey).reference += hr
	}
	admitFits := false
	if l := as.GetCurrentLimit(); l != nil {
		switch limit := uint64(l.GetRequestsPerUnit()); {
		case get(admKey).admit+ha <= limit:
			get(admKey).admit += ha
			admitFits = true
		case o.increment && ha > 0:
			get(admKey).admit = max(get(admKey).admit, limit) // what was left, if anything, taken
		}
	}
	for _, key := range []string{refKey, admKey} {
		if c := o.counters[key]; c != nil && c.reference != c.admit && c.why == "" {
			switch {
			case name != "":
				c.why = name
			case rs.GetCurrentLimit() != nil && as.GetCurrentLimit() != nil && !admitFits && o.increment:
				c.why = pastLimit
			case rs.GetCurrentLimit() != nil && as.GetCurrentLimit() != nil && !admitFits:
				c.why = "rejected hits counted"
			default:
				c.why = unexplained
			}
		}
	}
}

// describeCounters describes the counters of refKey and admKey, for a failure.
func (o *oracle) describeCounters(refKey, admKey string) string {
	var out []string
	for _, key := range slices.Compact([]string{refKey, admKey}) {
		if c := o.counters[key]; c != nil {
			out = append(out, fmt.Sprintf("%s: envoyproxy/ratelimit %d, admit %d, differing by %q", key, c.reference, c.admit, c.why))
		} else {
			out = append(out, key+": nothing")
		}
	}
	return strings.Join(out, "; ")
}

// pastLimit is the difference of a counter envoyproxy/ratelimit counted past the limit, and admit,
// with --envoy-increment-over-limit, to it.
const pastLimit = "counter past the limit"

// saw records an occurrence of the difference name, which must be allowed in this run.
func (o *oracle) saw(name string) {
	o.t.Helper()
	if !containsString(o.allowed, name) {
		o.t.Errorf("difference %q occurred, which this run does not allow", name)
	}
	o.seen.saw(o.t, name)
}

// pastLimitExplains reports whether admit's status as of descriptor d of req, on the counter c
// envoyproxy/ratelimit counted past the limit, is what a counter that stopped at the limit
// answers, and differs from envoyproxy/ratelimit's rs in the code and limit_remaining only:
// hits that fit, OK, and what is left after them.
func (o *oracle) pastLimitExplains(req *rlsv3.RateLimitRequest, d *ratelimitv3.RateLimitDescriptor, rs, as *rlsv3.RateLimitResponse_DescriptorStatus, c *counter, elapsed time.Duration) bool {
	if as.GetCurrentLimit() == nil {
		return false
	}
	_, ha := hits(req, d)
	limit, used := uint64(as.GetCurrentLimit().GetRequestsPerUnit()), c.admit
	if limit == 0 {
		used = 0 // admit decides requests_per_unit 0 without a counter
	}
	if c.reference <= used || used+ha > limit || as.GetCode() != rlsv3.RateLimitResponse_OK || uint64(as.GetLimitRemaining()) != limit-used-ha {
		return false
	}
	rest := proto.CloneOf(as)
	rest.Code, rest.LimitRemaining = rs.GetCode(), rs.GetLimitRemaining()
	return o.compareStatus(rs, rest, elapsed) == ""
}

// unexplained is the why of a counter that came to differ by no allowed difference: the step was
// reported, and so are the later answers of the counter that differ.
const unexplained = "unexplained"

// explain returns the allowed difference that explains why envoyproxy/ratelimit's status rs and
// admit's as of descriptor d of req differ, or "": the one that made their counters differ, or one
// this descriptor shows.
func (o *oracle) explain(req *rlsv3.RateLimitRequest, d *ratelimitv3.RateLimitDescriptor, rs, as *rlsv3.RateLimitResponse_DescriptorStatus, refKey, admKey string, elapsed time.Duration) string {
counters:
	for _, key := range []string{refKey, admKey} {
		if c := o.counters[key]; c != nil && c.why != "" {
			switch {
			case c.why == unexplained:
				return ""
			case c.why == pastLimit && !o.pastLimitExplains(req, d, rs, as, c, elapsed):
				break counters // not this answer: the descriptor's own differences, below, may
			}
			return c.why
		}
	}
	switch {
	case slices.ContainsFunc(req.GetDescriptors(), middleWildcardValue):
		return "middle wildcard" // this descriptor's rule, or through replaces another's
	}
	return ""
}

// middlePatterns are the values with a '*' before their end that the generator configures.
var middlePatterns = []string{"m*z"}

// middleWildcardValue reports whether an entry of d has a value one of middlePatterns matches as
// a pattern.
func middleWildcardValue(d *ratelimitv3.RateLimitDescriptor) bool {
	for _, e := range d.GetEntries() {
		for _, p := range middlePatterns {
			if ok, _ := path.Match(p, e.GetValue()); ok {
				return true
			}
		}
	}
	return false
}

// request returns a request of domain with one descriptor a list of key, value pairs, for hits.
func request(domain string, hits uint32, descriptors ...[]string) *rlsv3.RateLimitRequest {
	req := &rlsv3.RateLimitRequest{Domain: domain, HitsAddend: hits}
	for _, kv := range descriptors {
		d := &ratelimitv3.RateLimitDescriptor{}
		for i := 0; i+1 < len(kv); i += 2 {
			d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
		}
		req.Descriptors = append(req.Descriptors, d)
	}
	return req
}

// TestRequestSequences sends the same requests to envoyproxy/ratelimit's service and to admit
// serve, each on a redis-server of its own, and compares every answer (see compareStatus), except
// where the differences table allows otherwise: the sequences of envoyproxy/ratelimit's integration
// test on its configuration (in hours), then random requests on random configurations (descriptor
// trees with wildcards, shadow_mode, unlimited, names and replaces; requests with hits_addend,
// per-descriptor hits_addend and limit overrides), then the requests of boundaries.
func TestRequestSequences(t *testing.T) {
	sequences(t, false, "rejected hits counted", "middle wildcard")
}

// TestRequestSequencesIncrementOverLimit is TestRequestSequences with admit serve
// --envoy-increment-over-limit, envoyproxy/ratelimit's counting of rejected hits: the difference
// "rejected hits counted" is not allowed, only that admit's counter stops at the limit.
func TestRequestSequencesIncrementOverLimit(t *testing.T) {
	sequences(t, true, pastLimit, "middle wildcard")
}

// sequences runs the requests of TestRequestSequences, admit with --envoy-increment-over-limit
// when increment, allowing the differences allowed.
func sequences(t *testing.T, increment bool, allowed ...string) {
	seen := newSightings(t, allowed...)
	files := integrationFiles(t)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(seedEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want a number", seedEnv, v)
		}
		seed = n
	}
	t.Logf("seed %d (%s=%d runs these sequences again)", seed, seedEnv, seed)
	g := &generator{r: rand.New(rand.NewPCG(seed, 25))}
	const domains, steps = 6, 80
	trees := make([][]*node, domains)
	for i := range domains {
		g.names = nil
		var content string
		content, trees[i] = g.config(fmt.Sprintf("gen%d", i))
		files[fmt.Sprintf("gen%d.yaml", i)] = content
		t.Logf("gen%d.yaml:\n%s", i, content)
	}
	o := newOracle(t, files, seen, increment, allowed...)

	// envoyproxy/ratelimit's integration test: a domain of no file, one hit, a key filled and
	// over, two keys of one domain, one of them over.
	o.step(request("foo", 1, []string{"hello", "world"}))
	o.step(request("basic", 1, []string{"key1", "foo"}))
	for range 25 {
		o.step(request("another", 1, []string{"key2", "seq1"}))
	}
	for range 15 {
		o.step(request("another", 1, []string{"key2", "seq2"}, []string{"key3", "seq2"}))
	}
	for range 3 {
		o.step(request("basic", 1, []string{"one_per_minute", "seq3"}))
	}
	o.step(request("another", 7, []string{"key4", "seq4"}))
	o.step(request("another", 14, []string{"key4", "seq4"}))
	o.step(request("another", 0, []string{"key4", "seq4"}))

	for range steps {
		for i := range domains {
			o.step(g.request(fmt.Sprintf("gen%d", i), trees[i]))
		}
	}

	boundaries(o)
	t.Logf("%d statuses compared, %d with a current_limit, %d OVER_LIMIT", o.compared, o.limited, o.over)
	if o.limited < o.compared/4 || o.over < 50 {
		t.Errorf("the sequences limited too little to compare the services: %d statuses, %d with a current_limit, %d OVER_LIMIT", o.compared, o.limited, o.over)
	}
}

// boundaries sends the shapes of request where a service might draw a bound, which
// envoyproxy/ratelimit decides: a descriptor of no entries (alone, and with a limit override,
// twice), an entry of an empty key, is_negative_hits, 4,097 descriptors, a descriptor of 1,025
// entries, a hits_addend of 2^33 (and a hit after it), a value of 5,000 bytes and, twice, one of
// 2 MiB, longer than a subject of admit's KeyBuilder.
func boundaries(o *oracle) {
	o.step(request("basic", 1, []string{}))
	for range 2 {
		req := request("basic", 1, []string{})
		req.Descriptors[0].Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_HOUR}
		o.step(req)
	}
	o.step(request("basic", 1, []string{"", "foo"}))
	for range 2 {
		req := request("basic", 2, []string{"key1", "negative"})
		req.Descriptors[0].IsNegativeHits = true
		o.step(req)
	}
	var many [][]string
	for i := range 4097 {
		many = append(many, []string{"key1", fmt.Sprint("many", i)})
	}
	o.step(request("basic", 1, many...))
	var long []string
	for i := range 1025 {
		long = append(long, fmt.Sprint("k", i), "v")
	}
	o.step(request("basic", 1, long))
	huge := request("basic", 1, []string{"key1", "huge"})
	huge.Descriptors[0].HitsAddend = wrapperspb.UInt64(1 << 33)
	o.step(huge)
	o.step(request("basic", 1, []string{"key1", "huge"}))
	o.step(request("basic", 1, []string{"key1", strings.Repeat("v", 5000)}))
	for range 2 {
		o.step(request("basic", 1, []string{"key1", strings.Repeat("w", 2<<20)}))
	}
}
