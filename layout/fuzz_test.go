package layout

import (
	"testing"
)

// FuzzParseManifest: the parser never panics, and any manifest it accepts passes Validate
// again after a round trip through the writer's encoding.
func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(`{"format":"blockfs-dataset","version":1,"kind":"fixed","record_size":4,"records":2,"bytes":8,"ids":false,"preshuffle":{"shuffled":false,"seed":0},"blocks":[{"file":"blocks/000000.bin","records":2,"bytes":8,"crc32c":1}]}`))
	f.Add([]byte(`{"format":"blockfs-dataset","version":1,"kind":"variable","records":1,"bytes":3,"ids":true,"preshuffle":{"shuffled":true,"seed":5},"blocks":[{"file":"a","records":1,"bytes":3,"crc32c":0,"ids_file":"b","offsets_file":"c"}]}`))
	f.Add([]byte(`{"format":"blockfs-dataset","version":2}`))
	f.Add([]byte(`{"blocks":[{"file":"../x"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest("fuzz.json", data)
		if err != nil {
			return
		}
		again, err := ParseManifest("fuzz.json", ManifestJSON(m))
		if err != nil {
			t.Fatalf("accepted manifest does not survive a round trip: %v", err)
		}
		if again.Records != m.Records || len(again.Blocks) != len(m.Blocks) {
			t.Fatalf("round trip changed the manifest")
		}
	})
}
