package mount

// diskStats returns what stats.json shows of the disk cache, or nil without one; for a
// mixture, a list by source index (null for a source without one).
// storeStats returns what stats.json shows of the object stores: one's counters, or a list
// by source of a mixture's (null for a local source); nil when no source is in a store.
func (s *served) storeStats() func() any {
	any1 := false
	for _, st := range s.stacks {
		any1 = any1 || st.store != nil
	}
	if !any1 {
		return nil
	}
	if s.mux == nil || s.node {
		return func() any { return s.stacks[0].store() }
	}
	return func() any {
		out := make([]any, len(s.stacks))
		for i, st := range s.stacks {
			if st.store != nil {
				out[i] = st.store()
			}
		}
		return out
	}
}

func (s *served) diskStats() func() any {
	if s.mux == nil || s.node {
		return s.stacks[0].diskStats()
	}
	fns := make([]func() any, len(s.stacks))
	any1 := false
	for i, st := range s.stacks {
		fns[i] = st.diskStats()
		any1 = any1 || fns[i] != nil
	}
	if !any1 {
		return nil
	}
	return func() any {
		out := make([]any, len(fns))
		for i, f := range fns {
			if f != nil {
				out[i] = f()
			}
		}
		return out
	}
}

// sourceStats returns what stats.json says of a mixture's sources, or of a dataset's fields:
// the reads and bytes each gave the cache (from disk, the disk cache or the store); nil for
// one dataset.
func (p *Plan) sourceStats(sv *served) func() any {
	if sv.mux == nil || p.nodes != nil {
		return nil
	}
	var names []string
	switch {
	case p.mix != nil:
		for _, src := range p.mix.spec.Sources {
			names = append(names, src.Name)
		}
	case p.fields != nil:
		names = p.fields.names()
	}
	type sourceStats struct {
		Index int    `json:"index"`
		Name  string `json:"name"`
		Reads uint64 `json:"reads"`
		Bytes uint64 `json:"bytes_read"`
	}
	return func() any {
		out := make([]sourceStats, len(names))
		for i := range out {
			r, b := sv.mux.Read(i)
			out[i] = sourceStats{Index: i, Name: names[i], Reads: r, Bytes: b}
		}
		return out
	}
}

// diskStats returns what stats.json shows of the disk cache, or nil without one.
func (s *stack) diskStats() func() any {
	if s.disk == nil {
		return nil
	}
	return func() any { return s.disk.Stats() }
}
