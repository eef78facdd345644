package tenants

import "sync"

// Props built from a validated file.
//
// The app validates the tenants file once, in Load, and builds each pool's props from it. The
// construct checks a pool's props by the same rules (File.Validate), because a construct user's
// props come from nowhere else; for props the app built from a file Load accepted, that would be
// the whole file's check again, tenant by tenant. So the app vouches for the props it builds, and
// the construct skips the tenants-file rules for those. Only this module can vouch (the package is
// internal): the props of a Go app that imports the construct are always checked, once.
var vouched sync.Map

// Vouch records that props (a pointer, passed to the construct as it is) were built from a file
// that Parse validated, unchanged since.
func Vouch(props any) { vouched.Store(props, true) }

// Vouched reports whether Vouch recorded props, and forgets it: a vouch covers one construction.
func Vouched(props any) bool {
	_, ok := vouched.LoadAndDelete(props)
	return ok
}
