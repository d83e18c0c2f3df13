package falcon_test

import (
	"fmt"
	"time"

	"falconnic/falcon"
	"falconnic/falcon/link"
	"falconnic/falcon/tl"
)

// echo is a ULP: the target acks pushes and answers pulls with "pong"; the
// initiator prints completions.
type echo struct{}

func (echo) OnRequest(c *falcon.Conn, r *falcon.Request) {
	if r.Kind == tl.Push {
		fmt.Printf("target: push rsn=%d %q\n", r.RSN, r.Payload)
		c.AckPush(r.RSN)
		return
	}
	c.PullData(r.RSN, []byte("pong"))
}

func (echo) OnCompletion(c *falcon.Conn, cpl *falcon.Completion) {
	fmt.Printf("initiator: %v rsn=%d %v %q\n", cpl.Kind, cpl.RSN, cpl.Status, cpl.Data)
}

func (echo) OnXon(c *falcon.Conn) {}

// Two endpoints over an in-memory link with 5 µs of delay: a push and a pull
// on an ordered connection.
func Example() {
	p, err := falcon.NewPair(falcon.PairConfig{
		AB:   link.MemConfig{Delay: 5 * time.Microsecond},
		BA:   link.MemConfig{Delay: 5 * time.Microsecond},
		Conn: falcon.ConnConfig{SCID: 1, DCID: 2, Ordered: true, TxRSN: 1, RxRSN: 1},
		ULPA: echo{}, ULPB: echo{},
	})
	if err != nil {
		panic(err)
	}
	p.CA.Push(0, []byte("ping"))
	p.CA.Pull(0, 4)
	p.RunUntil(func() bool { return p.CA.Outstanding() == 0 }, time.Millisecond)
	// Output:
	// target: push rsn=1 "ping"
	// initiator: push rsn=1 ok ""
	// initiator: pull rsn=2 ok "pong"
}
