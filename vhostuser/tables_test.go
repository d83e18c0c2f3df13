package vhostuser

import (
	"reflect"
	"testing"

	"falconnic/internal/stats"
)

// Every request has a row in the size table, and every row either has a
// handler or is one we deliberately refuse.
func TestEveryRequestHasARow(t *testing.T) {
	refused := map[Request]bool{ReqSetLogBase: true, ReqSetLogFD: true, ReqSetBackendReqFD: true, ReqIOTLBMsg: true, ReqSetVringEndian: true}
	for r, rule := range requests {
		if rule.name == "" || rule.min > rule.max || rule.minFDs > rule.maxFDs {
			t.Errorf("%d: bad row %+v", r, rule)
		}
		if _, ok := handlers[r]; !ok && !refused[r] {
			t.Errorf("%v has no handler", r)
		}
	}
	for r := range handlers {
		if _, ok := requests[r]; !ok {
			t.Errorf("handler for %v without a size row", r)
		}
	}
}

// Every counter field is listed once, with a unique name and help.
func TestEveryCounterIsListed(t *testing.T) {
	var c Counters
	checkCounterSet(t, &c, c.Set())
}

func checkCounterSet(t *testing.T, ptr any, set stats.Set) {
	t.Helper()
	v := reflect.ValueOf(ptr).Elem()
	seen := map[*stats.Counter]bool{}
	names := map[string]bool{}
	for _, d := range set {
		if d.Help == "" || names[d.Name] || seen[d.Counter] {
			t.Errorf("counter %q: empty help or duplicate", d.Name)
		}
		names[d.Name], seen[d.Counter] = true, true
	}
	for i := 0; i < v.NumField(); i++ {
		p := v.Field(i).Addr().Interface().(*stats.Counter)
		if !seen[p] {
			t.Errorf("counter field %s is not in Set()", v.Type().Field(i).Name)
		}
	}
}
