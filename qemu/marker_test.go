package qemu

import (
	"os"
	"strings"
	"testing"
)

// The host waits for the marker guest/uinit prints; the two constants live
// apart (qemu may not import guest), so this test ties them.
func TestReadyMarkerMatchesTheGuest(t *testing.T) {
	src, err := os.ReadFile("../guest/uinit/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), `const ReadyMarker = "`+ReadyMarker+`"`) {
		t.Fatalf("guest/uinit does not print %q", ReadyMarker)
	}
	agent, err := os.ReadFile("../guest/agent/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(agent), `"`+AgentPortName+`"`) {
		t.Fatalf("guest/agent does not serve the port %q", AgentPortName)
	}
}

func TestParsePolicy(t *testing.T) {
	got := ParsePolicy(`perftest:
  Installed: (none)
  Candidate: 4.5+0.17-1
  Version table:
     4.5+0.17-1 500
libc6:amd64:
  Installed: 2.36-9+deb12u10
  Candidate: 2.36-9+deb12u13
nosuch:
  Installed: (none)
  Candidate: (none)
`)
	want := map[string]string{"perftest": "4.5+0.17-1", "libc6": "2.36-9+deb12u13", "nosuch": "(none)"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
}

func TestRewriteImportsMovesOnlyFalconnicPaths(t *testing.T) {
	in := "import (\n\t\"falconnic/guest/agentproto\"\n\t\"github.com/mdlayher/vsock\"\n\t\"falconnicx\"\n)\n"
	want := "import (\n\t\"" + guestModule + "/guest/agentproto\"\n\t\"github.com/mdlayher/vsock\"\n\t\"falconnicx\"\n)\n"
	if got := string(rewriteImports([]byte(in))); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
