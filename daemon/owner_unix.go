//go:build !windows

package daemon

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// fileOwner is the uid that owns a file, when the platform says.
func fileOwner(info fs.FileInfo) (int, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

// privateFile refuses a credentials file that belongs to another user or
// that group or others may read or write.
func privateFile(path string, info fs.FileInfo) error {
	if uid, ok := fileOwner(info); ok && uid != os.Getuid() {
		return fmt.Errorf("credentials %s belong to another user (uid %d); enroll as this user", path, uid)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("credentials %s are open to other users (mode %v), so the token in them may have leaked: run chmod 600 %s, or revoke the machine in the web app and enroll again", path, perm, path)
	}
	return nil
}

// privateDir refuses a control socket's directory that belongs to another
// user or that others may write to (they could put their own socket there).
func privateDir(dir string, info fs.FileInfo) error {
	if uid, ok := fileOwner(info); ok && uid != os.Getuid() {
		return fmt.Errorf("directory %s belongs to another user (uid %d); choose a --control path in a directory of your own", dir, uid)
	}
	if perm := info.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("directory %s is writable by other users (mode %v); choose a --control path in a directory only you can write to, or run chmod go-w %s", dir, perm, dir)
	}
	return nil
}

// privateSocket makes the control socket 0600: whoever can start sessions
// runs commands as this user.
func privateSocket(path string) error { return os.Chmod(path, 0o600) }
