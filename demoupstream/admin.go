package demoupstream

import "net/http"

func (s *Server) handleStats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Stats())
}

func (s *Server) handleStatsReset(w http.ResponseWriter, _ *http.Request) {
	s.Reset()
	writeJSON(w, http.StatusOK, s.Stats())
}

func (s *Server) handleGetFault(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.CurrentFault())
}

func (s *Server) handleSetFault(w http.ResponseWriter, r *http.Request) {
	f, err := decodeFault(r.Body)
	if err == nil {
		err = s.SetFault(f)
	}
	if err != nil {
		writeAdminError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.CurrentFault())
}

func (s *Server) handleHeal(w http.ResponseWriter, _ *http.Request) {
	s.Heal()
	writeJSON(w, http.StatusOK, s.CurrentFault())
}

func (s *Server) handleHealthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}
