import HTTPEngine
import JSON
import JSONRPC

/// The client's `pause` and `resume` (api/openrpc.json). The reasons a transfer is
/// paused live in one place, the engine's `PauseReasons`: this request's own reader
/// pauses it for lack of room (`.noRoom`: its buffer or its principal's budget is full,
/// or a response is thrown away for a retry) and lifts that in `budgetFreed`; the
/// client's pause is `.requested`, lifted only by `resume`. So a client-paused transfer
/// stays paused when its buffer drains, and `resume` does not make a full buffer take
/// bytes. The request remembers the client's pause (`pausedByClient`) for the whole
/// send: a retry's new transfer starts paused too. It ends with the send (DONE, or
/// `open`).
///
/// While paused the transfer's timeout does not run (`TransferEngine+Pause.swift`), no
/// low-speed limit exists to fire, and the request TTL never expires a request in
/// flight (`ObjectLifetime`).
extension HTTPRequest {
    /// Pauses the send in flight, both directions. Pausing a paused request is allowed.
    func pause() throws(RPCError) {
        guard state.isInFlight else { throw misuse("pause", allowed: "SENT, HEADERS_RECEIVED or LOADING") }
        pausedByClient = true
        transfer?.pause()
    }

    /// Lifts the client's pause; resuming a request that is not paused is allowed.
    func resume() throws(RPCError) {
        guard state.isInFlight else { throw misuse("resume", allowed: "SENT, HEADERS_RECEIVED or LOADING") }
        pausedByClient = false
        transfer?.unpause()
    }

    /// `getState` and `list` show `paused: true` while the client holds the request
    /// paused, and leave the member out otherwise (api/openrpc.json).
    func markPaused(_ o: inout JSONObject) {
        if pausedByClient { o["paused"] = .bool(true) }
    }
}
