package pack

import (
	"archive/tar"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/dstest"
)

// writeTar writes members to shard.tar in dir and returns its path.
func writeTar(t *testing.T, dir string, members []dstest.TarMember) string {
	p := filepath.Join(dir, "shard.tar")
	dstest.WriteTar(t, p, members)
	return p
}

// TestWebDatasetMemberNotRegular: a sample whose jpg is a symbolic link, a hard link, a FIFO
// or a device is refused naming that member and what it is, not "sample has no jpg member",
// with or without --fill-missing, wherever the member lies in the sample and also where the
// first regular jpg comes in a later sample; a link no sample's regular files name stays
// skipped.
func TestWebDatasetMemberNotRegular(t *testing.T) {
	reg := func(name, data string) dstest.TarMember {
		return dstest.TarMember{Name: name, Type: tar.TypeReg, Data: data}
	}
	for _, c := range []struct {
		name   string
		member dstest.TarMember
		what   string
	}{
		{"symlink", dstest.TarMember{Name: "d/0001.jpg", Type: tar.TypeSymlink, Link: "../images/0001.jpg"},
			`is a symbolic link (to "../images/0001.jpg"); WebDataset members must be regular files: store the file it links to (tar --dereference), or remove the member`},
		{"hard link", dstest.TarMember{Name: "d/0001.jpg", Type: tar.TypeLink, Link: "d/0000.jpg"},
			`is a hard link (to "d/0000.jpg"); WebDataset members must be regular files: store the file itself (tar --hard-dereference), or remove the member`},
		{"fifo", dstest.TarMember{Name: "d/0001.jpg", Type: tar.TypeFifo},
			`is a named pipe (FIFO); WebDataset members must be regular files: put the sample's value there as a regular file, or remove the member`},
		{"char device", dstest.TarMember{Name: "d/0001.jpg", Type: tar.TypeChar},
			`is a character device; WebDataset members must be regular files: put the sample's value there as a regular file, or remove the member`},
		{"block device", dstest.TarMember{Name: "d/0001.jpg", Type: tar.TypeBlock},
			`is a block device; WebDataset members must be regular files: put the sample's value there as a regular file, or remove the member`},
	} {
		for _, layout := range []struct {
			name    string
			members []dstest.TarMember
		}{
			{"after the sample's files", []dstest.TarMember{reg("d/0000.cls", "0"), reg("d/0000.jpg", "j0"), reg("d/0001.cls", "1"), c.member, reg("d/0002.cls", "2"), reg("d/0002.jpg", "j2")}},
			{"before the sample's files", []dstest.TarMember{reg("d/0000.cls", "0"), reg("d/0000.jpg", "j0"), c.member, reg("d/0001.cls", "1"), reg("d/0002.cls", "2"), reg("d/0002.jpg", "j2")}},
			{"regular jpgs only later", []dstest.TarMember{reg("d/0000.cls", "0"), reg("d/0001.cls", "1"), c.member, reg("d/0002.cls", "2"), reg("d/0002.jpg", "j2")}},
		} {
			for _, fill := range []bool{false, true} {
				t.Run(c.name+", "+layout.name, func(t *testing.T) {
					p := writeTar(t, t.TempDir(), layout.members)
					r, err := OpenWebDataset([]string{p}, fill)
					if err == nil {
						r.Close()
					}
					require.Error(t, err, "fill %v", fill)
					assert.Equal(t, p+`: sample "d/0001": member "d/0001.jpg" `+c.what, err.Error())
				})
			}
		}
	}
	// A link of its own key, beside no sample's regular file, is skipped as before.
	p := writeTar(t, t.TempDir(), []dstest.TarMember{reg("0000.cls", "0"), {Name: "latest.cls", Type: tar.TypeSymlink, Link: "0000.cls"}, reg("0001.cls", "1")})
	r, err := OpenWebDataset([]string{p}, false)
	require.NoError(t, err)
	defer r.Close()
	got, err := readSamples(t, r)
	require.NoError(t, err)
	assert.Len(t, got, 2)
}

// TestWebDatasetLinkUnpackedField: a link for a field no sample has as a regular file (every
// sample's .license a symbolic link to one file) is skipped, as webdataset skips it, so such
// a dataset packs as it did before links were refused; a sample's link for a packed field is
// still refused however many links of other keys or other fields come before it.
func TestWebDatasetLinkUnpackedField(t *testing.T) {
	reg := func(name, data string) dstest.TarMember {
		return dstest.TarMember{Name: name, Type: tar.TypeReg, Data: data}
	}
	link := func(name string) dstest.TarMember {
		return dstest.TarMember{Name: name, Type: tar.TypeSymlink, Link: "../LICENSE"}
	}
	var members []dstest.TarMember
	for _, k := range []string{"0000", "0001", "0002"} {
		members = append(members, link(k+".license"), reg(k+".cls", k), reg(k+".jpg", "j"+k), link(k+".license.txt"))
	}
	for _, fill := range []bool{false, true} {
		p := writeTar(t, t.TempDir(), members)
		r, err := OpenWebDataset([]string{p}, fill)
		require.NoError(t, err, "fill %v", fill)
		assert.Equal(t, []FieldSpec{{Name: "cls", Kind: VariableField}, {Name: "jpg", Kind: VariableField}}, r.Fields())
		got, err := readSamples(t, r)
		require.NoError(t, err)
		assert.Len(t, got, 3)
		require.NoError(t, r.Close())
	}

	const want = `: sample "0001": member "0001.jpg" is a symbolic link (to "../LICENSE"); WebDataset members must be regular files: store the file it links to (tar --dereference), or remove the member`
	for _, c := range []struct {
		name   string
		before []dstest.TarMember // members between sample 0000 and 0001.jpg
	}{
		{"links of other keys", func() (m []dstest.TarMember) {
			for i := range 20 {
				m = append(m, link(fmt.Sprintf("other%02d.license", i)))
			}
			return append(m, reg("0001.cls", "1"))
		}()},
		{"links of other fields", func() (m []dstest.TarMember) {
			m = append(m, reg("0001.cls", "1"))
			for i := range 20 {
				m = append(m, link(fmt.Sprintf("0001.note%02d", i)))
			}
			return m
		}()},
		{"links of other keys within the sample", func() (m []dstest.TarMember) {
			m = append(m, reg("0001.cls", "1"))
			for i := range 20 {
				m = append(m, link(fmt.Sprintf("other%02d.license", i)))
			}
			return m
		}()},
	} {
		members := append([]dstest.TarMember{reg("0000.cls", "0"), reg("0000.jpg", "j0")}, c.before...)
		members = append(members, link("0001.jpg"), reg("0002.cls", "2"), reg("0002.jpg", "j2"))
		for _, fill := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, fill %v", c.name, fill), func(t *testing.T) {
				p := writeTar(t, t.TempDir(), members)
				r, err := OpenWebDataset([]string{p}, fill)
				if err == nil {
					r.Close()
				}
				require.Error(t, err)
				assert.Equal(t, p+want, err.Error())
			})
		}
	}
}
