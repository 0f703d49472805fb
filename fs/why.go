package fs

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strings"
	"syscall"

	"github.com/blockfs/blockfs/internal/optname"
)

// whyNoMount says, in one line, why a mount at mnt could not be made, from what the machine
// shows: the reasons a user without root meets (no fusermount3, no access to /dev/fuse,
// --allow-other without user_allow_other) and a container's (no /dev/fuse, mount not
// permitted). It returns "" when it finds none of them; the caller then reports go-fuse's error.
func whyNoMount(allowOther bool, err error) string {
	dev, devErr := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if devErr == nil {
		dev.Close()
	}
	root := os.Geteuid() == 0
	_, found := Fusermount()
	switch {
	case errors.Is(devErr, os.ErrNotExist):
		return "/dev/fuse does not exist: load the fuse module (modprobe fuse), or in a container pass the device (docker run --device /dev/fuse --cap-add SYS_ADMIN; see docs/USAGE.md, 'Without root, and in containers')"
	case errors.Is(devErr, os.ErrPermission):
		mode := ""
		if st, err := os.Stat("/dev/fuse"); err == nil {
			mode = fmt.Sprintf(" (mode %#o)", st.Mode().Perm())
		}
		return fmt.Sprintf("user %s cannot open /dev/fuse for reading and writing%s: give the user access (a group that owns it, or a udev rule; see docs/USAGE.md, 'Without root, and in containers'), or mount as root", userName(), mode)
	case !root && !found:
		return "fusermount3 is not installed: a user without root mounts through it (install the fuse3 package)"
	case !root && allowOther && !userAllowOther():
		return optname.Flag("allow-other") + " needs user_allow_other in /etc/fuse.conf for a user without root (add that line, or drop " + optname.Flag("allow-other") + ")"
	case root && errors.Is(err, syscall.EPERM):
		return "mounting is not permitted here: in a container, add --cap-add SYS_ADMIN (or run it privileged; see docs/USAGE.md, 'Without root, and in containers')"
	}
	return ""
}

// Fusermount returns the path of fusermount3 (or the older fusermount), through which a user
// without root mounts and unmounts, and false when neither is on PATH.
func Fusermount() (string, bool) {
	for _, bin := range []string{"fusermount3", "fusermount"} {
		if p, err := exec.LookPath(bin); err == nil {
			return p, true
		}
	}
	return "", false
}

// userAllowOther reports whether /etc/fuse.conf has a user_allow_other line.
func userAllowOther() bool {
	f, err := os.Open("/etc/fuse.conf")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "user_allow_other" {
			return true
		}
	}
	return false
}

// userName names the effective user for messages.
func userName() string {
	uid := os.Geteuid()
	if u, err := user.LookupId(fmt.Sprint(uid)); err == nil {
		return fmt.Sprintf("%s (uid %d)", u.Username, uid)
	}
	return fmt.Sprintf("uid %d", uid)
}
