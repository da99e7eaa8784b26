package server

// Test hooks: nil in production, set by tests (export_test.go) to land an
// event in the one window a race needs, instead of hoping a scheduler does.
var (
	// afterRedeem runs between a ticket's redeem and the socket it opens:
	// where a sign-out can land.
	afterRedeem func()
	// afterDaemonAuth runs between a daemon's admission and its link's
	// registration: where a revoke can land.
	afterDaemonAuth func(machineID string)
)

func redeemed() {
	if afterRedeem != nil {
		afterRedeem()
	}
}

func daemonAdmitted(machineID string) {
	if afterDaemonAuth != nil {
		afterDaemonAuth(machineID)
	}
}
