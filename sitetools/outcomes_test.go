package sitetools

import (
	"testing"

	"github.com/tabbridge/tabbridge/store"
)

// TestStoreOutcomesAreTheAuditPages: the outcomes the store writes itself
// are the ones sitetools names for the pages.
func TestStoreOutcomesAreTheAuditPages(t *testing.T) {
	if OutcomeRunning != store.OutcomeRunning || OutcomeInterrupted != store.OutcomeInterrupted {
		t.Fatal("sitetools and store name the running or interrupted outcome differently")
	}
}
