package device

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"falconnic/device/rdma"
)

func TestLoadExampleConfig(t *testing.T) {
	cfg, err := LoadConfig("testdata/falconnic.json")
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := filepath.Abs("testdata")
	if got := cfg.Control; got != filepath.Join(dir, "control.sock") {
		t.Errorf("control = %s: relative paths resolve against the config's directory", got)
	}
	if len(cfg.NICs) != 2 || cfg.NICs[0].QueuePairs != 1 || cfg.NICs[1].QueuePairs != 2 {
		t.Errorf("nics = %+v", cfg.NICs)
	}
	if cfg.NICs[0].Socket != filepath.Join(dir, "n0.sock") {
		t.Errorf("socket = %s", cfg.NICs[0].Socket)
	}
	if time.Duration(cfg.Switch.MACAge) != 300*time.Second || cfg.Fabric.Paths != 1 || cfg.Fabric.Peers[0] != "127.0.0.1:7481" {
		t.Errorf("switch %+v fabric %+v", cfg.Switch, cfg.Fabric)
	}
	if cfg.Fabric.KeyFile != filepath.Join(dir, "fabric.key") {
		t.Errorf("key_file = %s: relative paths resolve against the config's directory", cfg.Fabric.KeyFile)
	}
}

func TestParseConfigDefaults(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"nics":[{"name":"a","socket":"/s","mac":"52:54:00:AA:BB:CC"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Control != DefaultControlSocket || cfg.Fabric != nil || cfg.NICs[0].QueuePairs != 1 || cfg.NICs[0].MAC != "52:54:00:aa:bb:cc" {
		t.Errorf("defaults: %+v", cfg)
	}
}

func TestParseConfigRDMA(t *testing.T) {
	for _, c := range []struct {
		rdma string
		want rdma.PollConfig
	}{
		{``, rdma.PollConfig{}},
		{`,"rdma":{}`, rdma.PollConfig{}},
		{`,"rdma":{"doorbell_polling":"off","poll_window_cap":"50us"}`, rdma.PollConfig{WindowCap: 50 * time.Microsecond}},
		{`,"rdma":{"doorbell_polling":"on"}`, rdma.PollConfig{On: true}},
		{`,"rdma":{"doorbell_polling":"on","poll_window_cap":"1ms"}`, rdma.PollConfig{On: true, WindowCap: time.Millisecond}},
	} {
		cfg, err := ParseConfig([]byte(`{"nics":[{"name":"a","socket":"/s","mac":"52:54:00:AA:BB:CC"` + c.rdma + `}]}`))
		if err != nil {
			t.Fatalf("%s: %v", c.rdma, err)
		}
		if got := cfg.NICs[0].pollConfig(); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.rdma, got, c.want)
		}
	}
}

func TestParseConfigRejects(t *testing.T) {
	nic := `{"name":"a","socket":"/s","mac":"52:54:00:00:00:01"}`
	for _, c := range []struct {
		name, json, want string
	}{
		{"unknown field", `{"nics":[],"color":"red"}`, "unknown field"},
		{"not json", `{`, "unexpected EOF"},
		{"trailing", `{"nics":[]} {}`, "trailing"},
		{"bad name", `{"nics":[{"name":"a b","socket":"/s","mac":"52:54:00:00:00:01"}]}`, "name"},
		{"dup name", `{"nics":[` + nic + `,{"name":"a","socket":"/t","mac":"52:54:00:00:00:02"}]}`, "used twice"},
		{"dup socket", `{"nics":[` + nic + `,{"name":"b","socket":"/s","mac":"52:54:00:00:00:02"}]}`, "used twice"},
		{"socket is control", `{"control":"/s","nics":[` + nic + `]}`, "used twice"},
		{"dup mac", `{"nics":[` + nic + `,{"name":"b","socket":"/t","mac":"52:54:00:00:00:01"}]}`, "used twice"},
		{"no socket", `{"nics":[{"name":"a","mac":"52:54:00:00:00:01"}]}`, "no socket"},
		{"bad mac", `{"nics":[{"name":"a","socket":"/s","mac":"52:54:00"}]}`, "mac"},
		{"multicast mac", `{"nics":[{"name":"a","socket":"/s","mac":"01:00:5e:00:00:01"}]}`, "unicast"},
		{"zero mac", `{"nics":[{"name":"a","socket":"/s","mac":"00:00:00:00:00:00"}]}`, "unicast"},
		{"doorbell polling", `{"nics":[{"name":"a","socket":"/s","mac":"52:54:00:00:00:01","rdma":{"doorbell_polling":"yes"}}]}`, "doorbell_polling"},
		{"poll window cap", `{"nics":[{"name":"a","socket":"/s","mac":"52:54:00:00:00:01","rdma":{"poll_window_cap":"1s"}}]}`, "poll_window_cap"},
		{"poll window cap unit", `{"nics":[{"name":"a","socket":"/s","mac":"52:54:00:00:00:01","rdma":{"poll_window_cap":200}}]}`, "duration"},
		{"eui64", `{"nics":[{"name":"a","socket":"/s","mac":"02:00:5e:10:00:00:00:01"}]}`, "48-bit"},
		{"queue pairs", `{"nics":[{"name":"a","socket":"/s","mac":"52:54:00:00:00:01","queue_pairs":17}]}`, "queue_pairs"},
		{"mac age", `{"nics":[],"switch":{"mac_age":"soon"}}`, "duration"},
		{"mac age number", `{"nics":[],"switch":{"mac_age":300}}`, "string"},
		{"listen", `{"nics":[],"fabric":{"listen":"localhost"}}`, "listen"},
		{"peer", `{"nics":[],"fabric":{"listen":"127.0.0.1:1","peers":["127.0.0.1"]}}`, "peer"},
		{"paths", `{"nics":[],"fabric":{"listen":"127.0.0.1:1","paths":17}}`, "paths"},
		{"loss", `{"nics":[],"fabric":{"listen":"127.0.0.1:1","loss_percent":-1,"insecure":true}}`, "loss"},
		{"no key file", `{"nics":[],"fabric":{"listen":"127.0.0.1:1"}}`, "key_file"},
		{"key and insecure", `{"nics":[],"fabric":{"listen":"127.0.0.1:1","key_file":"k","insecure":true}}`, "exclude"},
	} {
		_, err := ParseConfig([]byte(c.json))
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want ErrConfig mentioning %q", c.name, err, c.want)
		}
	}
}
