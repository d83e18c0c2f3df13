package main

import (
	"net"
	"reflect"
	"testing"
)

func TestParseCmdline(t *testing.T) {
	c, errs := parseCmdline("console=ttyS0 falconnic.hostname=A falconnic.net=52:54:00:00:00:0A,10.0.0.1/24,mtu=9000 falconnic.net=52:54:00:00:00:0b falconnic.ip=10.1.0.1/16 quiet\n")
	if len(errs) != 0 {
		t.Fatalf("errors: %v", errs)
	}
	want := config{hostname: "A", nics: []nicConfig{
		{mac: "52:54:00:00:00:0a", cidr: "10.0.0.1/24", mtu: "9000"},
		{mac: "52:54:00:00:00:0b"},
		{cidr: "10.1.0.1/16"},
	}}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got %+v\nwant %+v", c, want)
	}
}

func TestParseCmdlineReportsBadValues(t *testing.T) {
	c, errs := parseCmdline("falconnic.net=zz,10.0.0.1/24 falconnic.ip=10.0.0.300/24 falconnic.net=52:54:00:00:00:01,mtu=12")
	if len(errs) != 3 || len(c.nics) != 0 {
		t.Fatalf("got %+v with errors %v; want 3 errors and no NICs", c, errs)
	}
}

func FuzzParseCmdline(f *testing.F) {
	f.Add("console=ttyS0 falconnic.hostname=A falconnic.net=52:54:00:00:00:0a,10.0.0.1/24,mtu=9000")
	f.Add("falconnic.ip=10.0.0.1/24 falconnic.net=zz")
	f.Fuzz(func(t *testing.T, s string) {
		c, _ := parseCmdline(s)
		for _, n := range c.nics {
			if n.mac == "" && n.cidr == "" {
				t.Fatalf("NIC with neither MAC nor address from %q", s)
			}
			if n.cidr != "" {
				if _, _, err := net.ParseCIDR(n.cidr); err != nil {
					t.Fatalf("accepted bad CIDR %q", n.cidr)
				}
			}
		}
	})
}

func TestParseCmdlineNoload(t *testing.T) {
	c, errs := parseCmdline("falconnic.noload=falconnic,rdma_rxe falconnic.noload=")
	want := map[string]bool{"falconnic": true, "rdma_rxe": true}
	if len(errs) != 0 || !reflect.DeepEqual(c.noload, want) {
		t.Fatalf("noload = %v (errors %v), want %v", c.noload, errs, want)
	}
}
