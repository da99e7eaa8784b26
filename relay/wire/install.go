package wire

// InstallHeader carries the daemon's install id on its dial of /ws/daemon,
// beside the machine token in Authorization. `tabbridge daemon enroll`
// writes a random one into the token file; the server binds a machine to
// the first install that links with its token and refuses every other
// install (409 machine_other_install), so a copied token cannot take over
// the person's terminals, while a restarted daemon of the same install
// replaces its own stale link at once.
const InstallHeader = "X-Tabbridge-Install"

// Install id bounds: enroll writes 32 hex digits; the server takes any
// printable ASCII id within these lengths.
const (
	MinInstallID = 16
	MaxInstallID = 128
)

// ValidInstallID reports whether id is an install id the server accepts.
func ValidInstallID(id string) bool {
	if len(id) < MinInstallID || len(id) > MaxInstallID {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// FeaturesHeader is the server's answer, on the 101 of /ws/daemon, naming
// the daemon → server messages added after the first protocol that it
// takes, separated by commas. A daemon sends such a message only to a
// server that names it (httpguts.HeaderValuesContainsToken): a server older
// than the message closes the link on a control type it does not know.
const FeaturesHeader = "X-Tabbridge-Features"

// FeatureRefused names the daemon's "refused" control (TypeRefused).
const FeatureRefused = "refused"
