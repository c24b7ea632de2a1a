package prometheus_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// dashboardFile is admit's Grafana dashboard.
const dashboardFile = "../grafana/admit.json"

// A dashboard is the part of a Grafana dashboard's JSON model the tests read.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

// A panel is one panel of a dashboard (a row too, with Type "row").
type panel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource json.RawMessage `json:"datasource"`
	GridPos    struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		Expr       string          `json:"expr"`
		RefID      string          `json:"refId"`
		Datasource json.RawMessage `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

// A variable is one template variable of a dashboard.
type variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Definition string          `json:"definition"`
	Datasource json.RawMessage `json:"datasource"`
}

// readDashboard returns the dashboard's model, and its raw JSON decoded into any.
func readDashboard(t *testing.T) (dashboard, any) {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	var raw any
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	return d, raw
}

// allPanels returns the panels of d, those of collapsed rows included, rows left out.
func allPanels(d dashboard) []panel {
	var ps []panel
	var walk func([]panel)
	walk = func(list []panel) {
		for _, p := range list {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			ps = append(ps, p)
		}
	}
	walk(d.Panels)
	return ps
}

// datasourceRef is how every panel, target and query variable names its data source: the
// variable, never a data source's own uid, so the dashboard imports into any Grafana.
var datasourceRef = regexp.MustCompile(`^\$\{?datasource\}?$`)

// TestDashboardModel checks the dashboard's JSON model: a uid and a title; a data source variable
// of type prometheus; every data source reference, wherever it is, the variable; every panel with a
// title, a place on the 24-column grid and targets with an expression and a refId of their own;
// panel ids unique.
func TestDashboardModel(t *testing.T) {
	d, raw := readDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("the dashboard's uid %q and title %q: want both", d.UID, d.Title)
	}
	hasDatasource := slices.ContainsFunc(d.Templating.List, func(v variable) bool {
		return v.Name == "datasource" && v.Type == "datasource" && string(v.Query) == `"prometheus"`
	})
	if !hasDatasource {
		t.Errorf("the dashboard has no variable datasource of type datasource, query prometheus: %+v", d.Templating.List)
	}
	refs := 0
	walkJSON(raw, "", func(path string, key string, v any) {
		if key != "datasource" {
			return
		}
		refs++
		switch ds := v.(type) {
		case string:
			if !datasourceRef.MatchString(ds) {
				t.Errorf("%s.datasource = %q; want ${datasource}", path, ds)
			}
		case map[string]any:
			if uid, _ := ds["uid"].(string); !datasourceRef.MatchString(uid) || ds["type"] != "prometheus" {
				t.Errorf("%s.datasource = %v; want {type: prometheus, uid: ${datasource}}, no hard-coded uid", path, ds)
			}
		default:
			t.Errorf("%s.datasource = %v; want {type: prometheus, uid: ${datasource}}", path, v)
		}
	})
	if refs == 0 {
		t.Error("no data source reference in the dashboard")
	}
	if m, ok := raw.(map[string]any); ok && m["__inputs"] != nil {
		t.Error("the dashboard has __inputs: an export bound to one Grafana's data source; want the datasource variable")
	}

	ids := map[int]string{}
	panels := allPanels(d)
	if len(panels) == 0 {
		t.Fatal("the dashboard has no panel")
	}
	for _, p := range panels {
		if other, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", p.Title, other, p.ID)
		}
		ids[p.ID] = p.Title
		if p.Title == "" {
			t.Errorf("panel %d has no title", p.ID)
		}
		if g := p.GridPos; g.W < 1 || g.H < 1 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v off the 24-column grid", p.Title, g)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no target", p.Title)
		}
		refIDs := map[string]bool{}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" || tg.RefID == "" || refIDs[tg.RefID] {
				t.Errorf("panel %q: a target with expr %q and refId %q; want an expression and a refId of its own", p.Title, tg.Expr, tg.RefID)
			}
			refIDs[tg.RefID] = true
		}
	}
}

// walkJSON calls f with the path, key and value of every member of every object in v.
func walkJSON(v any, path string, f func(path, key string, v any)) {
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			f(path, k, child)
			walkJSON(child, path+"."+k, f)
		}
	case []any:
		for i, child := range x {
			walkJSON(child, path+"["+strconv.Itoa(i)+"]", f)
		}
	}
}

// grafanaVar matches a variable in a dashboard expression: $name, ${name} or ${name:format}.
var grafanaVar = regexp.MustCompile(`\$\{(\w+)(?::\w+)?\}|\$(\w+)`)

// grafanaBuiltins are the variables Grafana itself defines, and what they stand for in a test.
var grafanaBuiltins = map[string]string{"__rate_interval": "5m", "__interval": "1m", "__range": "1h"}

// dashboardExprs returns the dashboard's PromQL, by where it is: each target's expression and
// each query variable's, its Grafana variables replaced so that the parser reads it (a builtin
// interval by a duration, a template variable by .*, as "All" selects). A variable the dashboard
// does not define fails t.
func dashboardExprs(t *testing.T) map[string]string {
	t.Helper()
	d, _ := readDashboard(t)
	defined := map[string]bool{}
	for _, v := range d.Templating.List {
		defined[v.Name] = true
	}
	substitute := func(where, expr string) string {
		return grafanaVar.ReplaceAllStringFunc(expr, func(m string) string {
			sub := grafanaVar.FindStringSubmatch(m)
			name := sub[1] + sub[2]
			if d, ok := grafanaBuiltins[name]; ok {
				return d
			}
			if !defined[name] {
				t.Errorf("%s: variable $%s, which the dashboard does not define", where, name)
			}
			return ".*"
		})
	}
	exprs := map[string]string{}
	for _, p := range allPanels(d) {
		for _, tg := range p.Targets {
			where := "panel " + strings.TrimSpace(p.Title) + " target " + tg.RefID
			exprs[where] = substitute(where, tg.Expr)
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((.*),\s*(\w+)\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		where := "variable " + v.Name
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("%s: query %q; want label_values(SELECTOR, LABEL)", where, v.Definition)
			continue
		}
		// label_values(S, L) lists the values of L on S: the same as reading S by L.
		exprs[where] = substitute(where, "group by ("+m[2]+") ("+m[1]+")")
	}
	return exprs
}
