// Package daemon is a mount's life beside the data it serves: the mount point (checked before
// anything is mounted on it, and unmounted: mountpoint.go, devfd.go for a /dev/fd/N the parent
// mounted), the registry of the daemons up on the machine and the memory each claimed, read by
// the mounts that plan after them (registry.go, claims.go, claims_lock.go), the daemon's own
// log (logs.go) and the users' lease that ends a mount once its last user is gone (users.go).
// Package mount calls it; it knows nothing of datasets, caches or views.
package daemon
