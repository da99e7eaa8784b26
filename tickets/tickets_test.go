package tickets_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
	"github.com/tabbridge/tabbridge/tickets"
)

type clock struct{ t atomic.Pointer[time.Time] }

func newClock() *clock {
	c := &clock{}
	now := store.Now()
	c.t.Store(&now)
	return c
}
func (c *clock) now() time.Time          { return *c.t.Load() }
func (c *clock) advance(d time.Duration) { n := c.now().Add(d); c.t.Store(&n) }

// setup makes an account with a live sign-in (refresh family) and an issuer.
func setup(t *testing.T, db *store.DB) (*tickets.Issuer, *clock, string, string) {
	t.Helper()
	u, err := db.CreateOwner(context.Background(), "a@example.com", "A", "hash")
	if err != nil {
		t.Fatal(err)
	}
	_, family, err := db.IssueRefresh(context.Background(), u.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c := newClock()
	return tickets.New(db, c.now), c, u.ID, family
}

func TestRedeemOnceOnly(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		is, _, uid, family := setup(t, db)
		ctx := context.Background()
		plain, exp, err := is.Issue(ctx, uid, family, tickets.PurposeExtension, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(plain) < 40 || time.Until(exp) > tickets.TTL+time.Second {
			t.Fatalf("ticket %q expires %v", plain, exp)
		}
		got, err := is.Redeem(ctx, plain, tickets.PurposeExtension)
		if err != nil || got.UserID != uid || got.FamilyID != family {
			t.Fatalf("redeem: %+v %v", got, err)
		}
		if _, err := is.Redeem(ctx, plain, tickets.PurposeExtension); !errors.Is(err, tickets.ErrInvalid) {
			t.Fatalf("replay: got %v, want ErrInvalid", err)
		}
	})
}

func TestExpiredWrongPurposeAndUnknownAreRefused(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		is, c, uid, family := setup(t, db)
		ctx := context.Background()
		expiring, _, _ := is.Issue(ctx, uid, family, tickets.PurposeExtension, "")
		viewer, _, _ := is.Issue(ctx, uid, family, tickets.PurposeViewer, "session-1")
		if _, err := is.Redeem(ctx, viewer, tickets.PurposeExtension); !errors.Is(err, tickets.ErrInvalid) {
			t.Errorf("wrong purpose: got %v", err)
		}
		if _, err := is.Redeem(ctx, "tbt_forged", tickets.PurposeExtension); !errors.Is(err, tickets.ErrInvalid) {
			t.Errorf("unknown ticket: got %v", err)
		}
		c.advance(tickets.TTL + time.Millisecond)
		if _, err := is.Redeem(ctx, expiring, tickets.PurposeExtension); !errors.Is(err, tickets.ErrInvalid) {
			t.Errorf("expired: got %v", err)
		}
		n, err := is.Sweep(ctx)
		if err != nil || n != 2 {
			t.Errorf("sweep removed %d (%v), want 2", n, err)
		}
	})
}

func TestViewerTicketKeepsItsSubject(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		is, _, uid, family := setup(t, db)
		ctx := context.Background()
		plain, _, _ := is.Issue(ctx, uid, family, tickets.PurposeViewer, "session-42")
		got, err := is.Redeem(ctx, plain, tickets.PurposeViewer)
		if err != nil || got.Subject != "session-42" {
			t.Fatalf("redeem viewer ticket: %+v %v", got, err)
		}
	})
}

func TestConcurrentRedeemsExactlyOneWins(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		is, _, uid, family := setup(t, db)
		ctx := context.Background()
		plain, _, _ := is.Issue(ctx, uid, family, tickets.PurposeExtension, "")
		var wins, losses atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := is.Redeem(ctx, plain, tickets.PurposeExtension)
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, tickets.ErrInvalid):
					losses.Add(1)
				default:
					t.Errorf("redeem: %v", err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if wins.Load() != 1 || losses.Load() != 19 {
			t.Fatalf("wins=%d losses=%d, want 1 and 19", wins.Load(), losses.Load())
		}
	})
}

// TestTicketOfAnEndedSignInOpensNothing: a ticket asked for just before its
// sign-in ended is refused as signed out, and stays unspent; tickets of the
// person's other sign-in still open their door.
func TestTicketOfAnEndedSignInOpensNothing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		is, _, uid, family := setup(t, db)
		ctx := context.Background()
		_, other, err := db.IssueRefresh(ctx, uid, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		ext, _, _ := is.Issue(ctx, uid, family, tickets.PurposeExtension, "")
		view, _, _ := is.Issue(ctx, uid, family, tickets.PurposeViewer, "session-1:type")
		kept, _, _ := is.Issue(ctx, uid, other, tickets.PurposeExtension, "")
		if err := db.RevokeFamily(ctx, family); err != nil {
			t.Fatal(err)
		}
		for _, tk := range []struct{ plain, purpose string }{{ext, tickets.PurposeExtension}, {view, tickets.PurposeViewer}} {
			if _, err := is.Redeem(ctx, tk.plain, tk.purpose); !errors.Is(err, tickets.ErrSignedOut) {
				t.Errorf("%s ticket of an ended sign-in: got %v, want ErrSignedOut", tk.purpose, err)
			}
		}
		var used int64
		db.Model(&tickets.Ticket{}).Where("used_at IS NOT NULL").Count(&used)
		if used != 0 {
			t.Errorf("%d refused tickets were spent", used)
		}
		if got, err := is.Redeem(ctx, kept, tickets.PurposeExtension); err != nil || got.FamilyID != other {
			t.Fatalf("the other sign-in's ticket: %+v %v", got, err)
		}
	})
}

// TestUnspentTicketsAreBounded: a person holds at most MaxUnspent unspent,
// unexpired tickets of every purpose; one more is ErrTooMany and nothing is
// stored. Spending one, or one expiring, makes room; another person is not
// touched.
func TestUnspentTicketsAreBounded(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		is, clk, uid, family := setup(t, db)
		ctx := context.Background()
		other, err := db.CreateUser(ctx, "b@example.com", "B", "hash")
		if err != nil {
			t.Fatal(err)
		}
		var first string
		for i := range tickets.MaxUnspent {
			purpose := tickets.PurposeExtension
			if i%2 == 1 {
				purpose = tickets.PurposeViewer
			}
			plain, _, err := is.Issue(ctx, uid, family, purpose, "")
			if err != nil {
				t.Fatalf("ticket %d: %v", i+1, err)
			}
			if i == 0 {
				first = plain
			}
			clk.advance(time.Millisecond)
		}
		if _, _, err := is.Issue(ctx, uid, family, tickets.PurposeExtension, ""); !errors.Is(err, tickets.ErrTooMany) {
			t.Fatalf("ticket %d: %v, want ErrTooMany", tickets.MaxUnspent+1, err)
		}
		if _, _, err := is.Issue(ctx, other.ID, "", tickets.PurposeExtension, ""); err != nil {
			t.Fatalf("another person's ticket: %v", err)
		}
		if _, err := is.Redeem(ctx, first, tickets.PurposeExtension); err != nil {
			t.Fatal(err)
		}
		if _, _, err := is.Issue(ctx, uid, family, tickets.PurposeExtension, ""); err != nil {
			t.Fatalf("a ticket after one was spent: %v", err)
		}
		if _, _, err := is.Issue(ctx, uid, family, tickets.PurposeExtension, ""); !errors.Is(err, tickets.ErrTooMany) {
			t.Fatalf("the next: %v, want ErrTooMany", err)
		}
		clk.advance(tickets.TTL)
		if _, _, err := is.Issue(ctx, uid, family, tickets.PurposeExtension, ""); err != nil {
			t.Fatalf("a ticket after the others expired: %v", err)
		}
	})
}
