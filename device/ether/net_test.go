package ether

import (
	"reflect"
	"testing"

	"falconnic/internal/stats"
)

func TestEveryNetCounterIsListed(t *testing.T) {
	var c Counters
	seen := map[*stats.Counter]bool{}
	names := map[string]bool{}
	for _, d := range c.Set() {
		if d.Help == "" || names[d.Name] || seen[d.Counter] {
			t.Errorf("counter %q: empty help or duplicate", d.Name)
		}
		names[d.Name], seen[d.Counter] = true, true
	}
	v := reflect.ValueOf(&c).Elem()
	for i := 0; i < v.NumField(); i++ {
		if !seen[v.Field(i).Addr().Interface().(*stats.Counter)] {
			t.Errorf("counter field %s is not in Set()", v.Type().Field(i).Name)
		}
	}
}
