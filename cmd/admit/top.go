package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/admit-dev/admit/transport/admin"
)

const topUsage = `Usage: admit top [--admin URL[,URL...]] [--admin-token-file PATH] [--policy P] [-n N]

Asks the admin API of each running admit serve named by --admin (GET /v1/top) for the subjects
the policy P, or each policy, rejected most, merges the lists by subject digest (rejections
summed, the earliest first rejection, the latest last one) and prints one table per policy, most
rejected first, with the error bounds of the counts. Each instance counts its own rejections in
its own sketch: name every instance to see the whole picture. N is each instance's list
(default 20, at most server.top.size). The token comes from --admin-token-file, else $` + adminTokenEnv + `
(docs/operations.md#who-is-being-limited).

Exit status:
  0  every instance answered; the tables on stdout
  1  an instance refused (a wrong token, an unknown policy, no sketch) or could not be reached:
     its message on stderr, and the tables of those that answered, if any, on stdout
  2  the command line was wrong, or no admin token

Flags:
`

// An instanceTop is one instance's list of one policy, or why there is none.
type instanceTop struct {
	base string
	top  admin.TopResponse
	n    int // the n asked; 0 for the server's default
	err  error
}

// An instanceAnswer is one instance's answer to GET /v1/top: a list per policy, or why there is
// none.
type instanceAnswer struct {
	base string
	tops []admin.TopResponse
	err  error
}

// A mergedSubject is one subject of admit top's table: its counts summed over the instances that
// list it.
type mergedSubject struct {
	admin.TopSubject
	instances int // how many instances list it
}

// A topTable is the merge of the instances' answers.
type topTable struct {
	subjects []mergedSubject // most rejected first (ties: the latest seen first, then by digest)
	// over is the most by which any listed count may be above its subject's true number over the
	// instances that answered: the sum of their error bounds.
	over uint64
	// missing is the most rejections a subject not in the table may have had over them all, and
	// the most any listed subject's count may be below the truth (rejections on an instance that
	// did not list it): per instance, its error bound or, when its list was cut at n, the least count
	// it listed, whichever is larger; summed.
	missing  uint64
	revealed bool // some instance revealed raw subjects
}

// top runs admit top with args, and returns its exit code.
func top(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("admit top", flag.ContinueOnError)
	client := newAdminClient("top", fs)
	client.multi = true
	fs.Lookup("admin").Usage = "the admin API's `URL`, or several separated by commas: one per instance"
	var policyName string
	var n int
	fs.StringVar(&policyName, "policy", "", "the policy's `NAME`; default every policy")
	fs.IntVar(&n, "n", 0, fmt.Sprintf("the subjects each instance lists: `N` from 1 to server.top.size; default %d (at most the size)", admin.DefaultTopN))
	if code, ok := client.parse(args, topUsage, stdout, stderr); !ok {
		return code
	}
	nSet := false
	fs.Visit(func(f *flag.Flag) { nSet = nSet || f.Name == "n" })
	if nSet && n < 1 {
		return badUsage(stderr, "top", "-n %d; want at least 1", n)
	}
	if err := client.ready(); err != nil {
		return badUsage(stderr, "top", "%v", err)
	}
	query := url.Values{}
	if policyName != "" {
		query.Set("policy", policyName)
	}
	if nSet {
		query.Set("n", strconv.Itoa(n))
	}
	answers := askTops(ctx, client, query)
	code := exitOK
	var names []string // the policies, in the order the instances list them
	for _, a := range answers {
		if a.err != nil {
			fmt.Fprintf(stderr, "admit top: %s: %v\n", a.base, a.err)
			code = exitError
		}
		for _, top := range a.tops {
			if !slices.Contains(names, top.Policy) {
				names = append(names, top.Policy)
			}
		}
	}
	for i, name := range names {
		var lists []instanceTop
		for _, a := range answers {
			if j := slices.IndexFunc(a.tops, func(r admin.TopResponse) bool { return r.Policy == name }); j >= 0 {
				lists = append(lists, instanceTop{base: a.base, top: a.tops[j], n: n})
			}
		}
		table, answered := mergeTops(lists)
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		writeTopTable(stdout, name, table, answered, len(answers))
	}
	return code
}

// askTops asks every instance of client's --admin for GET /v1/top?query, at once, and returns
// their answers in the order of --admin: one policy's list with a policy in query, else each
// policy's.
func askTops(ctx context.Context, client *adminClient, query url.Values) []instanceAnswer {
	bases := client.bases()
	answers := make([]instanceAnswer, len(bases))
	var wg sync.WaitGroup
	for i, base := range bases {
		answers[i] = instanceAnswer{base: base}
		wg.Go(func() {
			a := &answers[i]
			endpoint, err := adminEndpoint(base, "/v1/top")
			if err != nil {
				a.err = err
				return
			}
			endpoint.RawQuery = query.Encode()
			body, err := client.do(ctx, http.MethodGet, endpoint.String(), nil)
			if err != nil {
				a.err = err
				return
			}
			var all admin.TopAllResponse
			if query.Has("policy") {
				all.Policies = make([]admin.TopResponse, 1)
				err = json.Unmarshal(body, &all.Policies[0])
			} else {
				err = json.Unmarshal(body, &all)
			}
			if err != nil {
				a.err = fmt.Errorf("the answer is not a /v1/top answer: %v", err)
				return
			}
			a.tops = all.Policies
		})
	}
	wg.Wait()
	return answers
}

// mergeTops merges the answers without an error by digest: rejected and error summed, the
// earliest first_seen, the latest last_seen, a raw subject from any instance that reveals it. It
// returns the table and the number of answers merged.
func mergeTops(answers []instanceTop) (topTable, int) {
	var t topTable
	byDigest := map[string]int{}
	answered := 0
	for _, a := range answers {
		if a.err != nil {
			continue
		}
		answered++
		r := a.top
		t.over += r.ErrorBound
		t.revealed = t.revealed || r.Revealed
		unlisted := r.ErrorBound
		// The server lists min(20, size) without n: a list of that many may have been cut.
		asked := a.n
		if asked == 0 {
			asked = min(admin.DefaultTopN, r.Size)
		}
		if len(r.Subjects) > 0 && len(r.Subjects) >= asked {
			unlisted = max(unlisted, r.Subjects[len(r.Subjects)-1].Rejected)
		}
		t.missing += unlisted
		for _, s := range r.Subjects {
			i, seen := byDigest[s.Digest]
			if !seen {
				byDigest[s.Digest] = len(t.subjects)
				t.subjects = append(t.subjects, mergedSubject{TopSubject: s, instances: 1})
				continue
			}
			m := &t.subjects[i]
			m.instances++
			m.Rejected += s.Rejected
			m.Error += s.Error
			if s.FirstSeen.Before(m.FirstSeen) {
				m.FirstSeen = s.FirstSeen
			}
			if s.LastSeen.After(m.LastSeen) {
				m.LastSeen = s.LastSeen
			}
			if m.Key == "" {
				m.Key = s.Key
			}
		}
	}
	slices.SortFunc(t.subjects, func(a, b mergedSubject) int {
		switch {
		case a.Rejected != b.Rejected:
			return cmpDesc(a.Rejected, b.Rejected)
		case !a.LastSeen.Equal(b.LastSeen):
			return b.LastSeen.Compare(a.LastSeen)
		}
		return strings.Compare(a.Digest, b.Digest)
	})
	return t, answered
}

// cmpDesc orders a before b when a is larger.
func cmpDesc(a, b uint64) int {
	if a > b {
		return -1
	}
	return 1
}

// writeTopTable prints t: a line of what it covers and its bounds, then one row per subject.
func writeTopTable(w io.Writer, policyName string, t topTable, answered, asked int) {
	fmt.Fprintf(w, "policy %s: %d of %d instances answered; subjects listed: %d\n", policyName, answered, asked, len(t.subjects))
	if answered < asked {
		fmt.Fprintln(w, "counts and bounds are those of the instances that answered: the others' rejections are not in them")
	}
	if t.over == 0 && t.missing == 0 {
		fmt.Fprintln(w, "counts exact: no sketch replaced an entry and no list was cut")
	} else {
		fmt.Fprintf(w, "error bound: a count may be over by at most its ERROR (at most %d in all: space-saving, each sketch's largest replaced count in its period);\n", t.over)
		fmt.Fprintf(w, "  a count may be under, and a subject not listed rejected, by at most %d (instances' bounds and cut lists)\n", t.missing)
	}
	if len(t.subjects) == 0 {
		fmt.Fprintln(w, "no subject listed: none rejected in the sketches' period")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := "DIGEST\tREJECTED\tERROR\tINSTANCES\tFIRST_SEEN\tLAST_SEEN"
	if t.revealed {
		header += "\tKEY"
	}
	fmt.Fprintln(tw, header)
	for _, s := range t.subjects {
		row := fmt.Sprintf("%s\t%d\t%d\t%d\t%s\t%s", s.Digest, s.Rejected, s.Error, s.instances,
			s.FirstSeen.UTC().Format(time.RFC3339), s.LastSeen.UTC().Format(time.RFC3339))
		if t.revealed {
			row += "\t" + strconv.Quote(s.Key)
		}
		fmt.Fprintln(tw, row)
	}
	tw.Flush()
}
