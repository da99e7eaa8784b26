package daemon

import "io/fs"

// fileOwner is not known from Windows file info: access is by ACL.
func fileOwner(fs.FileInfo) (int, bool) { return 0, false }

// privateFile accepts the file: on Windows the credentials live in the
// user's profile (%AppData%), whose ACL already admits only that user,
// SYSTEM and administrators, and the Unix mode bits mean nothing there.
func privateFile(string, fs.FileInfo) error { return nil }

// privateDir accepts the directory: the default one is in the user's
// profile, protected by its ACL; mode bits mean nothing on Windows.
func privateDir(string, fs.FileInfo) error { return nil }

// privateSocket leaves the socket as created: it inherits the ACL of its
// directory in the user's profile.
func privateSocket(string) error { return nil }
