package codec_test

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
)

func Example() {
	reg := srfake.New()
	defer reg.Close()
	cl, _ := sr.NewClient(sr.URLs(reg.URL()))

	// At start-up: register (or look up) the schemas of every topic.
	c, err := codec.New(context.Background(), codec.Options{Registry: cl, Register: true})
	if err != nil {
		panic(err)
	}
	topics := codec.DefaultTopics()

	// Per record: no registry call.
	value, _ := c.Encode(topics.RefundRedemption, &events.RedemptionRequested{
		TransactionID: "T-2", LoyaltyID: "L-1", TransactionDate: time.Date(2026, 11, 20, 10, 31, 0, 0, time.UTC),
		Amount: 50000, UsedPoint: 120,
	})
	ev, err := c.DecodeEvent(context.Background(), topics.RefundRedemption, value)
	fmt.Println(ev.Type(), ev.ID(), err, ev.Validate())

	_, err = c.Decode(context.Background(), topics.RefundRedemption, value[:len(value)-1])
	fmt.Println(err)
	// Output:
	// RedemptionRequested T-2 <nil> <nil>
	// decode loyalty.refund-redemption: TRUNCATED (schema id 4): body ends inside com.loyaltybridge.events.RedemptionRequested
}
