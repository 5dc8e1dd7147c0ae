import CCurl

/// When libcurl need not look for a cached connection to reuse.
///
/// libcurl 7.88 looks for one (`ConnectionExists`) by walking every connection it holds
/// to the transfer's host, in use or not, each time a transfer connects. With thousands
/// of transfers running to one host that walk is quadratic: 10,000 fetches started at
/// once to a slow upstream spent about 70% of a multi-second loop stall in it
/// (`Benchmarks/README.md`, `inflight`). The walk can only find an idle connection, or an
/// in-use one that multiplexes; when neither can exist, `CURLOPT_FRESH_CONNECT` skips it
/// and the transfer opens the connection it would have opened anyway.
///
/// - Idle: a connection libcurl keeps idle in its cache is one whose socket it stopped
///   watching (`CURL_POLL_REMOVE` once its transfer ended); every socket is opened by the
///   engine (`openSocket`), which counts those libcurl is not watching
///   (`unwatchedSockets`). The count also takes in paused transfers' sockets and sockets
///   not yet watched, so it overstates the idle ones and errs towards the walk.
/// - Multiplexing: only an HTTP/2 connection is shared while in use, and the engine
///   offers HTTP/2 only over TLS, to a transfer that allows multiplexing.
/// - A cap on connections per host (`maxHostConnections`) makes transfers wait in
///   libcurl for a connection to come free, and such a transfer must then reuse it:
///   with a cap the search always runs.
///
/// Decided when the transfer joins the multi; it connects on libcurl's next run, in the
/// same or the next loop turn. A connection another transfer leaves idle in between is
/// not used by this one (it stays cached for the next). libcurl's own redirects and
/// authentication rounds reuse their connection regardless, and a redirect the engine
/// follows configures the handle afresh without this.
extension TransferEngine {
    func skipsConnectionSearch(_ t: Transfer) -> Bool {
        guard unwatchedSockets == 0, options.maxHostConnections == 0 else { return false }
        return !t.hop.multiplexing || t.origin?.scheme != "https"
    }
}

/// When a transfer's connection closes as the transfer ends instead of joining the cache.
///
/// libcurl 7.88 keeps a finished transfer's connection only while its cache, busy
/// connections counted, holds at most `CURLMOPT_MAXCONNECTS`; past that, for each
/// transfer that ends, it walks every connection it holds for the oldest idle one and
/// closes it (`ConnectionDone`). With thousands of transfers running the walks are
/// quadratic: 10,000 fetches released at once cost xhrpcd 5-6 s of CPU, most of it in
/// those walks (`Benchmarks/README.md`, `inflight`).
///
/// Two things keep them away. `maxConnections` counts idle connections only: libcurl's
/// limit is kept at that many plus the transfers in the multi (`sizeConnectionCache`),
/// so a transfer that ends while thousands run leaves its connection to the cache
/// without a walk, and libcurl walks only when more than `maxConnections` would be
/// idle. And a transfer that joins while `maxConnections` others are already in the
/// multi gets `CURLOPT_FORBID_REUSE`: its connection is closed when it ends, with no
/// walk, so a burst does not leave thousands idle (each past `maxConnections` a walk).
/// The transfers that joined before still leave theirs to the cache, so up to
/// `maxConnections` stay for reuse as before. An HTTP/2 connection (TLS, multiplexing)
/// may carry other transfers and is left to libcurl. Decided when the transfer joins;
/// a redirect the engine follows configures the handle afresh without it.
extension TransferEngine {
    func closesConnectionAfterwards(_ t: Transfer) -> Bool {
        guard !t.hop.multiplexing || t.origin?.scheme != "https" else { return false }
        return transfersRunning(besides: t) >= max(1, options.maxConnections)
    }

    /// The transfers in the multi, or about to join it this turn, other than `t`. A
    /// waiting `t` (being admitted) is among both the active and the waiting, so
    /// it is out already.
    func transfersRunning(besides t: Transfer) -> Int {
        activeTransfers - waitingToJoin - (active.contains(t) && t.state != .waitingToAdd ? 1 : 0)
    }

    /// Keeps libcurl's cache limit at `maxConnections` idle connections beyond the
    /// transfers in the multi. Called before a transfer joins (it counts) and after
    /// every libcurl run (the ended ones no longer do); libcurl reads the limit only as
    /// a transfer ends, inside a run. Outside libcurl's callbacks only, where
    /// `curl_multi_setopt` is allowed, and never once `shutdown` has freed the multi (a
    /// delegate may shut the engine down from a completion, before `afterCurl` ends).
    func sizeConnectionCache() {
        let size = max(1, options.maxConnections) + max(0, activeTransfers - waitingToJoin)
        guard size != connectionCacheSize, isOpen, !inCurl else { return }
        if multi.set(CURLMOPT_MAXCONNECTS, size) == CURLM_OK { connectionCacheSize = size }
    }
}
