#if canImport(Glibc)
import Glibc
#endif
import CCurl
import CShims
import EventLoop
import Logging

/// Runs HTTP transfers with one libcurl multi handle driven by the loop, the
/// multi_socket way (curl's `docs/examples/multi-uv.c`): libcurl says which descriptors
/// to watch and when to wake it, and the loop tells libcurl what became ready.
///
/// Pieces and who owns them:
/// - The multi handle and its connection cache (so sequential requests to one host reuse
///   a connection), capped by `EngineOptions`. Cleaned up in `shutdown`.
/// - One `Timer` for libcurl's timeout (`CURLMOPT_TIMERFUNCTION`), one for work
///   deferred to the next turn (`resume`, failed polls), and one for the transfers'
///   own timeouts (`TransferEngine+Pause.swift`); one prepare handle that ends each loop
///   turn's allowances: how many started transfers join the multi
///   (`TransferEngine+Admission.swift`) and how many ready sockets reach libcurl
///   (`TransferEngine+Readiness.swift`).
/// - One `Poll` per socket (see `TransferEngine+Sockets.swift`), restarted when
///   libcurl's interest changes, stopped lazily when libcurl stops watching, and closed
///   only when libcurl closes the socket.
/// - The running transfers, retained in `active` from `start` until they complete or are
///   cancelled; libcurl's callbacks find them through an unretained pointer, valid
///   because a transfer leaves the multi before it leaves `active`.
/// - A pool of reset easy handles (`EasySlot`).
///
/// Re-entrancy, the one subtle part: delegates are called from inside
/// `curl_multi_socket_action` (body, head, progress), where libcurl forbids adding or
/// removing handles. So while libcurl is on the stack (`inCurl`), `start` queues the add,
/// `cancel` silences the transfer at once and queues the removal, and `shutdown` waits;
/// the queues are worked off as soon as libcurl returns (`afterCurl`; the adds within
/// the turn's allowance, the rest on later turns). No delegate is
/// ever called synchronously from `start`, `cancel`, `resume` or `shutdown`.
///
/// Confined to the loop's thread.
public final class TransferEngine {
    let loop: Loop
    let options: EngineOptions
    /// `User-Agent: …` for the requests that name none, as C text (`configureHeaders`);
    /// nil when the options give no User-Agent.
    let userAgentLine: ContiguousArray<CChar>?
    let multi: MultiHandle
    /// False once `shutdown` cleaned up the multi: nothing may touch it after that.
    var isOpen = true
    let log = Logger(label: "xhrpc.http")

    /// libcurl's single timeout; armed and stopped by `CURLMOPT_TIMERFUNCTION`.
    let curlTimer: Timer
    /// Fires on the next turn to run `pendingResumes` and `pendingSocketErrors`, and
    /// keeps the loop from blocking while ready sockets wait (`readyQueue`).
    let deferredTimer: Timer
    /// Fires at the earliest deadline of the transfers in `timed`.
    let timeoutTimer: Timer
    /// Started transfers with a timeout, by deadline; the rest never need the timeout
    /// timer.
    var timed = TransferDeadlines()
    /// The deadline the timeout timer was last armed for.
    var timeoutArmedFor: Double?
    /// Counts the libuv handles this engine opened and not yet saw closed, so `shutdown`
    /// knows when the last close callback ran.
    let handles = HandleCounter()

    /// Socket watches, indexed by descriptor (descriptors are small and dense).
    var watches: [SocketWatch?] = []
    /// How many of the sockets the engine opened libcurl is not watching: at least every
    /// idle connection in its cache (`skipsConnectionSearch`).
    var unwatchedSockets = 0
    /// The engine-opened sockets that have carried a request, by local port
    /// (`TransferEngine+PooledConnections.swift`).
    var pooledConnections: [Int: [SocketWatch]] = [:]
    /// The `CURLMOPT_MAXCONNECTS` last given to libcurl (`sizeConnectionCache`, before
    /// every transfer joins; 0 until the first does).
    var connectionCacheSize = 0

    /// Transfers started and not yet completed or cancelled; holds the strong reference
    /// libcurl's callbacks rely on.
    var active = TransferSet()

    /// Running transfers paused for any reason (`PauseReasons`: their reader has no
    /// room, or their client paused them); for metrics.
    public var pausedTransferCount: Int { active.pausedCount }
    /// Reset easy handles ready for the next transfer.
    var pool: [EasySlot] = []
    static let poolLimit = 64

    /// True while a libcurl call that may run transfer callbacks is on the stack.
    var inCurl = false
    /// Transfers waiting to join the multi (`TransferEngine+Admission.swift`).
    var pendingAdds = TurnQueue<Transfer>()
    /// How many transfers are `waitingToAdd`, kept by `Transfer.state` as transfers enter
    /// and leave that state. Not `pendingAdds.count`: a transfer cancelled or timed out
    /// while waiting stays in the queue until its turn comes, and counting it made the
    /// number of running transfers (`transfersRunning`) negative, and a receive buffer's
    /// share a division by zero, once a client let go of many waiting fetches at once.
    var waitingToJoin = 0
    /// Transfers that joined the multi this loop turn; the admission handle resets it.
    var admittedThisTurn = 0
    /// Of those, the ones that open a new connection (`connectsPerTurn`).
    var connectsThisTurn = 0
    /// Runs once per loop turn, just before the loop polls, while a turn's allowance is
    /// in use or anything waits for the next one (`endTurn`).
    let turnHandle: Prepare
    /// Ready sockets held for a later turn (`TransferEngine+Readiness.swift`).
    var readyQueue = TurnQueue<SocketWatch>()
    /// Readiness events passed to libcurl this loop turn.
    var readyThisTurn = 0
    var pendingRemovals: [Transfer] = []
    /// Cancelled transfers still in the multi, waiting for a turn's removal allowance
    /// (`cancel`).
    var deferredRemovals = TurnQueue<Transfer>()
    /// Running transfers taken out of the multi by `cancel` this loop turn.
    var removedThisTurn = 0
    var pendingResumes: [Transfer] = []
    var pendingSocketErrors: [curl_socket_t] = []
    /// Transfers the egress policy refused in `start`, completed on the next turn.
    var pendingDenials: [Transfer] = []
    var pendingShutdown: [() -> Void] = []

    /// The closures handed to timers, made once (a closure literal at each `start` would
    /// allocate a context every time).
    lazy var curlTimerFired: () -> Void = { [unowned self] in
        self.socketAction(Curl.socketTimeout, 0)
    }
    lazy var deferredTimerFired: () -> Void = { [unowned self] in
        self.runDeferred()
    }
    lazy var timeoutTimerFired: () -> Void = { [unowned self] in
        self.timeoutsDue()
    }
    lazy var turnEnded: () -> Void = { [unowned self] in
        self.endTurn()
    }

    /// Makes the multi handle and the three timers. Throws when libcurl or libuv cannot
    /// (out of memory, a closed loop); nothing is left open then.
    public init(loop: Loop, options: EngineOptions = .init()) throws {
        self.loop = loop
        self.options = options
        userAgentLine = options.userAgent.isEmpty ? nil : "User-Agent: \(options.userAgent)".utf8CString
        guard let m = curl_multi_init() else {
            throw TransferFailure(CURLE_OUT_OF_MEMORY, "curl_multi_init failed: out of memory")
        }
        multi = MultiHandle(raw: m)
        let t1: Timer, t2: Timer, t3: Timer, p: Prepare
        do {
            t1 = try Timer(loop: loop)
            do { t2 = try Timer(loop: loop) } catch { t1.close(); throw error }
            do { t3 = try Timer(loop: loop) } catch { t1.close(); t2.close(); throw error }
            do { p = try Prepare(loop: loop) } catch { t1.close(); t2.close(); t3.close(); throw error }
        } catch {
            curl_multi_cleanup(m)
            throw error
        }
        curlTimer = t1
        deferredTimer = t2
        timeoutTimer = t3
        turnHandle = p
        handles.opened()
        handles.opened()
        handles.opened()
        handles.opened()

        let me = Unmanaged.passUnretained(self).toOpaque()
        var rc = xh_multi_setopt_socket_cb(m, CURLMOPT_SOCKETFUNCTION, TransferEngine.socketCallback)
        if rc == CURLM_OK { rc = xh_multi_setopt_ptr(m, CURLMOPT_SOCKETDATA, me) }
        if rc == CURLM_OK { rc = xh_multi_setopt_timer_cb(m, CURLMOPT_TIMERFUNCTION, TransferEngine.timerCallback) }
        if rc == CURLM_OK { rc = xh_multi_setopt_ptr(m, CURLMOPT_TIMERDATA, me) }
        if rc == CURLM_OK { rc = multi.set(CURLMOPT_MAX_HOST_CONNECTIONS, max(0, options.maxHostConnections)) }
        if rc == CURLM_OK { rc = multi.set(CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX)) }
        if rc != CURLM_OK {
            let text = String(cString: curl_multi_strerror(rc))
            shutdown {}
            throw TransferFailure(CURLE_FAILED_INIT, "Cannot configure the transfer engine: \(text)")
        }
    }

    deinit {
        // An engine dropped without `shutdown` still must not leave libcurl or libuv
        // holding pointers to it: do the synchronous part now. The handles finish closing
        // on the loop's next turn; nobody is told.
        if isOpen { shutdown {} }
    }

    /// Transfers started and not yet completed or cancelled.
    public var activeTransfers: Int {
        active.count - pendingRemovals.count - deferredRemovals.count
    }

    // MARK: - Starting

    /// Configures an easy handle from the request and adds it to the multi.
    ///
    /// Throws a `TransferFailure` for anything wrong with the request itself: a malformed
    /// URL, a scheme other than http and https, a header with CR/LF/NUL, an upload file
    /// that cannot be opened, an option libcurl refuses. Nothing is called on the
    /// delegate then, and the transfer stays unstarted. Called from inside a delegate
    /// callback, the handle joins the multi once libcurl has returned.
    public func start(_ t: Transfer) throws {
        guard isOpen, pendingShutdown.isEmpty else {
            throw TransferFailure(CURLE_FAILED_INIT, "The transfer engine is shut down")
        }
        guard t.state == .idle else {
            throw TransferFailure(CURLE_BAD_FUNCTION_ARGUMENT,
                                  "This transfer was already started; make a new Transfer for each request")
        }
        var target = try TransferEngine.validate(url: t.request.url)
        t.origin = target
        t.startedAt = TransferEngine.monotonicSeconds()
        t.activeClock.start(at: t.startedAt)
        if let denial = startDenial(target) {
            deny(t, denial)
            return
        }
        // Judged as the address it names, `127.0.0.1.` is connected to at that address.
        if let addressed = try URLTarget.addressingIPv4Literally(t.request.url, target) {
            t.hop.url = addressed.url
            target = addressed.target
            t.origin = target
        }
        guard let slot = pool.popLast() ?? EasySlot() else {
            throw TransferFailure(CURLE_OUT_OF_MEMORY, "curl_easy_init failed: out of memory")
        }
        do {
            try configure(slot, for: t, isHTTPS: target.scheme == "https")
        } catch {
            t.releaseResources()
            recycle(slot)
            throw error
        }
        t.slot = slot
        t.engine = self
        active.insert(t)
        if t.request.timeout > 0 {
            timed.insert(t, deadline: t.activeClock.deadline(for: t.request.timeout) ?? .infinity)
            armTimeouts()
        }
        guard !inCurl, admitsNow(t) else {
            enqueue(t)
            return
        }
        if let failure = add(t) { throw failure }
    }

    /// Adds a configured transfer to the multi. On failure the transfer is taken back
    /// out of `active` and the failure returned.
    func add(_ t: Transfer) -> TransferFailure? {
        guard let slot = t.slot else { return TransferFailure(CURLE_FAILED_INIT, "Transfer has no handle") }
        if skipsConnectionSearch(t) { try? slot.easy.set(CURLOPT_FRESH_CONNECT, 1) }
        if closesConnectionAfterwards(t) { try? slot.easy.set(CURLOPT_FORBID_REUSE, 1) }
        let receiveBuffer = receiveBufferBytes(joining: t)
        if receiveBuffer < Self.fullReceiveBuffer { try? slot.easy.set(CURLOPT_BUFFERSIZE, receiveBuffer) }
        sizeConnectionCache()
        let rc = curl_multi_add_handle(multi.raw, slot.easy.raw)
        guard rc == CURLM_OK else {
            t.state = .cancelled
            detach(t)
            return TransferFailure(CURLE_FAILED_INIT, "Cannot add the transfer: \(String(cString: curl_multi_strerror(rc)))")
        }
        t.inMulti = true
        t.state = .running
        holdIfRequested(t)
        return nil
    }

    // MARK: - Stopping

    /// Stops a transfer: takes it out of the multi and frees what it holds. No delegate
    /// call happens after `cancel` returns, not even a completion libcurl already had
    /// queued: the transfer is silenced at once, and when called from inside a libcurl
    /// callback the removal itself follows as soon as libcurl returns. A transfer that is
    /// not running (never started, finished, cancelled) is left alone.
    ///
    /// At most `removalsPerTurn` running transfers leave the multi per loop turn; the
    /// others wait, silenced, for the next turns (`endRemovalTurn`). Taking one out
    /// mid-response closes its connection, and a client that goes away with 10,000
    /// fetches in flight had them all closed in one turn (a `server.info` call on another
    /// connection waited 264-504 ms).
    public func cancel(_ t: Transfer) {
        guard t.engine === self else { return }
        switch t.state {
        case .idle, .finished, .cancelled:
            return
        case .waitingToAdd:
            t.state = .cancelled  // skipped when its turn to join comes
            detach(t)
        case .running:
            t.state = .cancelled
            timed.remove(t)  // silenced: no timeout is to end it while it waits to leave
            if inCurl {
                pendingRemovals.append(t)
                return
            }
            watchTurn()  // renews the allowance, or takes the waiting ones out, at the turn's end
            if removedThisTurn < TransferEngine.removalsPerTurn {
                removedThisTurn += 1
                detach(t)
            } else {
                deferredRemovals.append(t)
                armDeferred()
            }
        }
    }

    /// Running transfers `cancel` takes out of the multi per loop turn, as many as ready
    /// sockets are passed to libcurl (`readyPerTurn`).
    static let removalsPerTurn = 32

    /// At the end of a turn (`endTurn`): a new allowance, then the cancelled transfers
    /// waiting for one, in order. Returns whether removals still need the turn handle.
    func endRemovalTurn() -> Bool {
        let removedBefore = removedThisTurn
        removedThisTurn = 0
        while isOpen, removedThisTurn < TransferEngine.removalsPerTurn, let t = deferredRemovals.popFirst() {
            removedThisTurn += 1
            detach(t)
        }
        if !deferredRemovals.isEmpty { armDeferred() }  // the next poll must not block while some wait
        return removedBefore != 0 || removedThisTurn != 0 || !deferredRemovals.isEmpty
    }

    /// Takes `t`'s handle out of the multi if it is in, and forgets the sockets libcurl
    /// closed on the way without saying so.
    func removeFromMulti(_ t: Transfer, _ slot: EasySlot) {
        guard t.inMulti else { return }
        t.inMulti = false
        let rc = curl_multi_remove_handle(multi.raw, slot.easy.raw)
        if rc != CURLM_OK { log.warning("curl_multi_remove_handle: \(String(cString: curl_multi_strerror(rc)))") }
        forgetSocketsClosedUnannounced(by: t)
    }

    /// Takes a transfer out of the multi, frees its request resources, returns its easy
    /// handle to the pool and drops the engine's reference. The transfer's state was set
    /// to `finished` or `cancelled` before, so libcurl callbacks that
    /// `curl_multi_remove_handle` may still make reach no delegate.
    func detach(_ t: Transfer) {
        if let slot = t.slot {
            t.slot = nil
            removeFromMulti(t, slot)
            t.releaseResources()
            recycle(slot)
        }
        t.pauseReasons = []
        t.pausedInCurl = false
        active.remove(t)
        timed.remove(t)
    }

    /// Resets a slot for the pool, or lets it go (and be cleaned up) when the pool is
    /// full or the engine is shutting down.
    private func recycle(_ slot: EasySlot) {
        guard isOpen, pool.count < TransferEngine.poolLimit else { return }
        slot.reset()
        pool.append(slot)
    }

    /// Makes sure the connection a finished transfer left in the cache is not reused
    /// (`close`, api/openrpc.json). libcurl has no call to close one cached connection, so the
    /// engine shuts the socket's reading side down (`shutdown(2)`, `SHUT_RD`): libcurl's
    /// liveness check then reads end-of-file, finds it dead before any reuse and closes
    /// it through the close-socket callback. Only the reading side: libcurl sends a TLS
    /// close_notify while it disconnects, and on a socket shut for writing that send
    /// fails with EPIPE, whose "Send failure: Broken pipe" libcurl writes into the error
    /// buffer of whichever transfer is running, where it would hide that transfer's own
    /// failure text. Best effort by design: a connection some other transfer took over
    /// since (libcurl is watching it, or the last transfer that used it is still
    /// running — an HTTP/2 connection shared by several) is left alone rather than
    /// broken under that transfer; one that already closed needs nothing.
    public func closeConnections(usedBy t: Transfer) {
        guard isOpen, t.state == .finished, let w = t.lastConnection else { return }
        t.lastConnection = nil
        if let user = w.lastUser, active.members.contains(where: { $0.slot?.easy.raw == user }) { return }
        retire(w)
    }

    // MARK: - Driving libcurl

    /// Tells libcurl that `fd` is ready (or that its timeout expired, for
    /// `CURL_SOCKET_TIMEOUT`), then does what its callbacks asked for.
    func socketAction(_ fd: curl_socket_t, _ flags: Int32) {
        guard isOpen else { return }
        var running: Int32 = 0
        inCurl = true
        let rc = curl_multi_socket_action(multi.raw, fd, flags, &running)
        inCurl = false
        if rc != CURLM_OK { log.warning("curl_multi_socket_action: \(String(cString: curl_multi_strerror(rc)))") }
        afterCurl()
    }

    /// Works off what delegates asked for while libcurl was on the stack, then collects
    /// finished transfers. Removals come first so their connections are free for the
    /// adds that follow.
    func afterCurl() {
        if !pendingRemovals.isEmpty {
            let removals = pendingRemovals
            pendingRemovals = []
            for t in removals { detach(t) }
        }
        drainMessages()
        admitWaiting()
        sizeConnectionCache()
        if !pendingShutdown.isEmpty {
            let completions = pendingShutdown
            pendingShutdown = []
            shutdown { for c in completions { c() } }
        }
    }

    /// Reads every `CURLMSG_DONE` libcurl has queued and completes those transfers.
    private func drainMessages() {
        var left: Int32 = 0
        while isOpen, let msg = curl_multi_info_read(multi.raw, &left) {
            guard msg.pointee.msg == CURLMSG_DONE, let raw = msg.pointee.easy_handle else { continue }
            // Copy out before anything can remove the handle: the message lives in it.
            let result = msg.pointee.data.result
            guard let p = EasyHandle(raw: raw).info(pointer: CURLINFO_PRIVATE) else { continue }
            let t = Unmanaged<Transfer>.fromOpaque(p).takeUnretainedValue()
            complete(t, result)
        }
    }

    /// A transfer libcurl finished: follows a redirect with the next hop, or gives a
    /// body-less success its head, records the metrics, takes the handle out of the
    /// multi, and only then tells the delegate, so a delegate that starts its next
    /// request from `completedWith` can reuse the handle and the connection.
    private func complete(_ t: Transfer, _ result: CURLcode) {
        guard t.state == .running, let slot = t.slot else { return }
        let effectiveURL = slot.easy.info(string: CURLINFO_EFFECTIVE_URL, reusing: t.hop.url) ?? t.hop.url
        var failure: TransferFailure?
        if let why = t.framingError {
            failure = TransferFailure(CURLE_WEIRD_SERVER_REPLY, TransferFailure.invalidFramingPrefix + why)
        } else if let why = t.decodingFailure {
            failure = TransferFailure(CURLE_BAD_CONTENT_ENCODING, why)
        } else if result == CURLE_ABORTED_BY_CALLBACK, let why = t.upload?.failure {
            failure = TransferFailure(CURLE_READ_ERROR, why)
        } else if result == CURLE_OUT_OF_MEMORY, !t.headDelivered {
            // libcurl 7.88 holds a header line in a buffer capped at CURL_MAX_HTTP_HEADER
            // and says only "Out of memory" when a line passes it.
            failure = TransferFailure(result, "Response header too large: a line of the head passed libcurl's limit of "
                + "\(CURL_MAX_HTTP_HEADER / 1024) KiB")
        } else if result != CURLE_OK {
            failure = egressFailure(of: t, at: effectiveURL) ?? TransferFailure(
                curlCode: result, errorBuffer: slot.errorBuffer,
                osErrno: Int32(truncatingIfNeeded: slot.easy.info(long: CURLINFO_OS_ERRNO) ?? 0),
                overTLS: effectiveURL.prefix(6).lowercased() == "https:")
        } else if let why = t.decoder?.unfinished {
            // Whole framing around a coded stream that stops short: the body is not all
            // there, whatever libcurl counted (`ContentDecoder`).
            failure = TransferFailure(CURLE_BAD_CONTENT_ENCODING, why)
        } else if let redirect = t.redirectHead {
            failure = followRedirect(t, slot, redirect, from: effectiveURL)
            if failure == nil { return }  // the next hop runs
        }
        if failure != nil, t.hop.proxy != nil, slot.easy.info(long: CURLINFO_HTTP_CONNECTCODE) == 407 {
            let offered = slot.easy.info(long: CURLINFO_PROXYAUTH_AVAIL) ?? 0
            t.tunnelChallenge = AuthScheme.allCases.filter { offered & TransferEngine.authBits($0) != 0 }
        }
        t.metrics = TransferMetrics(
            effectiveURL: effectiveURL,
            redirectCount: t.redirectsFollowed,
            connectionsOpened: t.earlierConnections + (slot.easy.info(long: CURLINFO_NUM_CONNECTS) ?? 0),
            totalTime: TransferEngine.monotonicSeconds() - t.startedAt)
        // The connection libcurl kept for reuse, if any, for `closeConnections(usedBy:)`.
        // Only readable now: after removal from the multi libcurl no longer knows it.
        t.lastConnection = cachedConnection(of: slot)
        if failure == nil, !t.headDelivered, let delegate = t.delegate {
            t.deliverHead(delegate)
            guard t.state == .running else { return }  // cancelled from receivedHead
        }
        t.state = .finished
        detach(t)
        if t.connectionSuspect { closeConnections(usedBy: t) }
        t.delegate?.transfer(t, completedWith: failure)
    }

    /// The connection a finished hop left in libcurl's cache, if any.
    func cachedConnection(of slot: EasySlot) -> SocketWatch? {
        var socket = Curl.socketBad
        guard xh_easy_getinfo_socket(slot.easy.raw, CURLINFO_ACTIVESOCKET, &socket) == CURLE_OK, socket >= 0 else {
            return nil
        }
        let w = watch(socket)
        if (slot.easy.info(long: CURLINFO_HTTP_VERSION) ?? 0) >= Curl.http2 { w?.multiplexed = true }
        return w
    }

    // MARK: - Loop turns

    /// Has `endTurn` called at the end of this loop turn.
    func watchTurn() {
        if !turnHandle.isActive { turnHandle.start(turnEnded) }
    }

    /// The turn handle's callback: renews the per-turn allowances — transfers joining
    /// (`TransferEngine+Admission.swift`), ready sockets passed to libcurl
    /// (`TransferEngine+Readiness.swift`), cancelled transfers taken out of the multi
    /// (`cancel`) — and lets the waiting ones go on. It stops once a turn used none and
    /// nothing waits.
    func endTurn() {
        guard isOpen else { return }
        let admitting = endAdmissionTurn()
        let passing = endReadyTurn()
        let removing = endRemovalTurn()
        if !admitting, !passing, !removing { turnHandle.stop() }
    }

    // MARK: - Deferred work

    /// Queues an unpause for the next turn (see `Transfer.resume`): the delegate made
    /// room, so `.noRoom` is lifted then.
    func scheduleResume(_ t: Transfer) {
        guard isOpen, t.state == .running || t.state == .waitingToAdd else { return }
        t.roomMade = true
        schedulePauseUpdate(t)
    }

    /// Queues, for the next turn, bringing libcurl's pause in line with `t`'s reasons.
    func schedulePauseUpdate(_ t: Transfer) {
        guard !t.pauseUpdateScheduled else { return }
        t.pauseUpdateScheduled = true
        pendingResumes.append(t)
        armDeferred()
    }

    func armDeferred() {
        if !deferredTimer.isActive { deferredTimer.start(timeout: 0, deferredTimerFired) }
    }

    /// Next-turn work: complete the transfers the egress policy refused at `start`,
    /// unpause the transfers whose delegates made room, report sockets whose poll could
    /// not start, then let libcurl run whatever that made due.
    private func runDeferred() {
        guard isOpen else { return }
        if !pendingDenials.isEmpty {
            let denials = pendingDenials
            pendingDenials = []
            for t in denials { completeDenied(t) }
        }
        let resumes = pendingResumes
        pendingResumes = []
        let errors = pendingSocketErrors
        pendingSocketErrors = []
        inCurl = true
        for t in resumes { applyPause(t) }
        var running: Int32 = 0
        for fd in errors {
            _ = curl_multi_socket_action(multi.raw, fd, Curl.selectErr, &running)
        }
        // Unpausing set a 0 ms libcurl timeout; run it now rather than a turn later.
        _ = curl_multi_socket_action(multi.raw, Curl.socketTimeout, 0, &running)
        inCurl = false
        afterCurl()
    }

    // MARK: - Shutdown

    /// Aborts every transfer without telling their delegates, cleans up the multi (which
    /// closes the cached connections), and closes the timers and every poll handle.
    /// `completion` runs once the last of those handles' close callbacks ran, so the
    /// caller may then close the loop with no handle left. Called from inside a delegate
    /// callback, it starts once libcurl has returned. Calling it again after it finished
    /// runs `completion` on the next close, or right away when all are closed.
    public func shutdown(_ completion: @escaping () -> Void) {
        if inCurl {
            // Silence everything now, as `cancel` would; the teardown itself waits
            // until libcurl has returned.
            for t in active.members { t.state = .cancelled }
            pendingShutdown.append(completion)
            return
        }
        guard isOpen else {
            handles.whenAllClosed(completion)
            return
        }
        for t in active.members {
            t.state = .cancelled
            detach(t)
        }
        pendingAdds.removeAll()
        pendingRemovals = []
        deferredRemovals.removeAll()
        pendingResumes = []
        pendingSocketErrors = []
        pendingDenials = []
        readyQueue.removeAll()
        isOpen = false
        pool = []  // curl_easy_cleanup for each, before the multi goes
        // Closes the cached connections: libcurl reports each socket through the socket
        // and close-socket callbacks, which close their polls.
        curl_multi_cleanup(multi.raw)
        for fd in watches.indices where watches[fd] != nil { closeWatch(fd: Int32(fd)) }
        watches = []
        curlTimer.close(handles.closedCallback)
        deferredTimer.close(handles.closedCallback)
        timeoutTimer.close(handles.closedCallback)
        turnHandle.close(handles.closedCallback)
        timed.removeAll()
        handles.whenAllClosed(completion)
    }
}
