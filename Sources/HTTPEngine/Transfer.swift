import CCurl
import CShims  // CURLINFO_* resolve through it in release (whole-module) builds

/// One HTTP exchange: a request, the delegate that hears about it, and — while it runs —
/// the libcurl easy handle doing the work.
///
/// Lifetime: the Service object owns the Transfer, and the Transfer holds its delegate
/// *weakly* (the delegate is usually that same owner, so a strong reference would be a
/// cycle). While a transfer runs, the engine holds it strongly too, so dropping it
/// without `cancel` does not tear libcurl's handle out from under libcurl. If the
/// delegate goes away while the transfer runs, the engine aborts the transfer at its next
/// callback that would reach the delegate (body bytes, changed progress figures), or
/// after a few unchanged progress reports if it is stalled (`progressArrived`), and says
/// nothing more: nobody is left to hear.
///
/// A Transfer runs once. To repeat a request, make a new Transfer. A run may take
/// several hops: the engine follows redirects itself, each hop on the same easy handle
/// (`TransferEngine+Redirects.swift`). Confined to the loop's thread, like everything
/// in this module.
public final class Transfer {
    /// The request as the caller made it (its body dropped once the run is over).
    public private(set) var request: TransferRequest
    /// What the current hop sends: `request` at first, then what each redirect made of
    /// it (`RedirectRule`).
    var hop: TransferRequest
    /// The URL of the current hop (after redirects followed so far): the one a
    /// delivered head answered.
    public var currentURL: String { hop.url }
    /// The schemes a proxy offered when it refused the CONNECT tunnel with 407
    /// (`CURLINFO_PROXYAUTH_AVAIL`), set before a failed completion is reported; nil for
    /// any other ending. The proxy's `Proxy-Authenticate` header itself is not seen
    /// (`CURLOPT_SUPPRESS_CONNECT_HEADERS`), so no realm.
    public internal(set) var tunnelChallenge: [AuthScheme]?
    /// Redirects followed so far.
    var redirectsFollowed = 0
    /// The head of the redirect the current hop answered with, set at the blank line
    /// that ends it: its body is read and dropped, and the engine follows it when the
    /// hop completes.
    var redirectHead: ResponseHead?
    /// Why a response head's framing is invalid (RFC 9112 §6.3), found at the end of the
    /// head; the transfer is aborted there and ends with this as its failure.
    var framingError: String?
    /// A head with both Transfer-Encoding and Content-Length was read on this hop: the
    /// body is framed by Transfer-Encoding (as RFC 9112 §6.3 says), and the connection
    /// is not reused afterwards (`TransferEngine.retireConnection`).
    var connectionSuspect = false
    /// A head of this transfer (a redirect hop's or an interim one's included) carried a
    /// `Set-Cookie`: libcurl may have stored cookies in the request's jar.
    public private(set) var sawSetCookie = false
    /// Where the caller's URL leads, read once at `start`: credentials go only there.
    var origin: URLTarget?
    /// When the first hop started (`monotonicSeconds`), for `TransferMetrics.totalTime`
    /// (the timeout reads `activeClock`); connections opened by earlier hops.
    var startedAt = 0.0
    var earlierConnections = 0
    public private(set) weak var delegate: TransferDelegate?
    /// Figures about the finished transfer, set just before `completedWith`.
    public internal(set) var metrics: TransferMetrics?

    /// Where a transfer is in its one run. Transitions:
    /// - `idle` → `waitingToAdd` (started from inside a libcurl callback) or `running`
    /// - `waitingToAdd` → `running` (added once libcurl returned) or `cancelled`
    /// - `running` → `finished` (libcurl said done) or `cancelled`
    /// The delegate hears from a transfer only while it is `running`.
    enum State { case idle, waitingToAdd, running, finished, cancelled }
    var state = State.idle {
        didSet {
            if (oldValue == .waitingToAdd) != (state == .waitingToAdd) { engine?.waitingToJoin += state == .waitingToAdd ? 1 : -1 }
        }
    }
    /// The engine that runs it, for `resume()`; weak because the engine owns running
    /// transfers, never the other way round.
    weak var engine: TransferEngine?
    /// The easy handle and its error buffer while the engine runs the transfer.
    var slot: EasySlot?
    /// Whether the easy handle is currently added to the multi.
    var inMulti = false
    /// Request headers as libcurl's list, freed when the transfer ends (`releaseResources`).
    var headerList: OpaquePointer?
    /// The body being uploaded through the read callback, if any.
    var upload: UploadSource?
    var headParser = ResponseHeadParser()
    var headDelivered = false
    /// Undoes the final response's content codings (`ContentDecoder`): made with its
    /// head when the request decodes and the head names a coding; nil for a body that
    /// reaches the delegate as it came.
    var decoder: ContentDecoder?
    /// Why the final response's body could not be decoded (`ContentDecoder.Outcome`):
    /// the transfer was aborted there and ends with this as its failure.
    var decodingFailure: String?
    /// Why the transfer is paused (`PauseReasons`); empty while it flows. The engine
    /// counts its paused transfers (`pausedTransferCount`) as this empties and fills.
    public internal(set) var pauseReasons: PauseReasons = [] {
        didSet { if oldValue.isEmpty != pauseReasons.isEmpty { engine?.active.pauseChanged(self) } }
    }
    /// libcurl holds the transfer paused (a callback returned its pause code, or the
    /// engine called `curl_easy_pause`) and no `CURLPAUSE_CONT` followed yet.
    var pausedInCurl = false
    /// `resume()` was called: the engine's next turn lifts `.noRoom`.
    var roomMade = false
    /// The engine's next-turn timer will bring libcurl's pause in line with the reasons.
    var pauseUpdateScheduled = false
    /// Where the engine's `active` and `timed` sets hold it.
    var places = Places()
    /// The whole-transfer timeout's clock (`TransferEngine+Pause.swift`).
    var activeClock = ActiveClock()
    /// The sockets opened for this transfer (`TransferEngine.openSocket`), checked when it
    /// leaves the multi: libcurl may have closed some without a word
    /// (`forgetSocketsClosedUnannounced`).
    var openedSockets: [curl_socket_t] = []
    /// The cached connection this transfer used, noted at completion (weak: the watch
    /// goes when the socket closes).
    weak var lastConnection: SocketWatch?
    var lastProgress = TransferProgress(uploaded: 0, uploadTotal: 0, downloaded: 0, downloadTotal: 0)
    /// Progress reports with the figures of the one before (see `progressArrived`).
    var unchangedProgressReports = 0
    /// Why the egress policy stopped this transfer at `start` or at a redirect hop; the
    /// failure it completes with (see `TransferEngine+Egress.swift`).
    var denial: TransferFailure?
    /// The reasons the policy gave for each address the open-socket callback refused,
    /// in the order libcurl tried them, and how many addresses it let through.
    var deniedAddresses: [String] = []
    var allowedConnects = 0
    static let delegateCheckInterval = 4

    /// Makes a transfer that has not started; `TransferEngine.start` runs it.
    public init(request: TransferRequest, delegate: TransferDelegate) {
        self.request = request
        self.hop = request
        self.delegate = delegate
    }

    deinit {
        // A transfer that never started, or whose start failed halfway, may still hold its
        // header list; one that ran released it when it ended.
        releaseResources()
    }

    /// Asks for the paused body to flow again (the delegate has room now). Takes effect
    /// on the next turn of the loop, because unpausing makes libcurl deliver the held
    /// bytes right away, from inside `curl_easy_pause`: the delegate must not be called
    /// back from inside its own call to `resume`. Harmless when not paused or not running.
    public func resume() {
        engine?.scheduleResume(self)
    }

    /// True while any reason pauses it: from the moment the delegate refused body bytes
    /// until the engine unpaused the transfer on a later turn (so still true between
    /// `resume()` and that turn), and while the caller holds it paused (`pause()`).
    public var isPaused: Bool { !pauseReasons.isEmpty }

    /// Frees what libcurl borrowed for this run. Called when the transfer leaves the
    /// multi (completion, cancel, shutdown), after libcurl stopped using these.
    func releaseResources() {
        if let list = headerList {
            curl_slist_free_all(UnsafeMutablePointer(list))
            headerList = nil
        }
        upload = nil
        // The run is over: a file body's descriptor closes with its last holder
        // (`UploadFile`), not when whoever keeps this transfer lets it go.
        request.body = .none
        hop.body = .none
    }

    /// Hands the final head to the delegate: the block in progress, or, if libcurl never
    /// showed a status line (it should not happen for HTTP), one made from the response
    /// code. Only called while `running`; the delegate may cancel from inside.
    func deliverHead(_ delegate: TransferDelegate) {
        headDelivered = true
        var head = headParser.current
        if head == nil, let code = slot?.easy.info(long: CURLINFO_RESPONSE_CODE), code > 0 {
            head = ResponseHead(status: code, statusText: HTTPStatus.phrase(for: code), headers: [], httpVersion: "")
        }
        guard let head else { return }
        if hop.decodesContent, let codings = head.contentEncoding {
            decoder = ContentDecoder(contentEncoding: codings)
        }
        delegate.transfer(self, receivedHead: head)
    }

    // MARK: - Called from libcurl's callbacks (see TransferCallbacks.swift)

    /// Body bytes from the write callback. Returns what libcurl expects back: the count
    /// to go on, `CURL_WRITEFUNC_PAUSE` to pause, anything else (0) to abort.
    func bodyArrived(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard state == .running, let delegate else { return 0 }
        // The body of a redirect being followed: read so the connection can be reused,
        // and dropped (libcurl does the same with the bodies of redirects it follows).
        if redirectHead != nil { return bytes.count }
        // Paused by the caller: libcurl keeps the bytes and offers them after `unpause`.
        if pauseReasons.contains(.requested) {
            pausedInCurl = true
            return Curl.writePause
        }
        if !headDelivered {
            deliverHead(delegate)
            guard state == .running else { return 0 }
        }
        let accepted: Bool
        if let decoder {
            let outcome = decoder.decode(bytes) { decoded in
                delegate.transfer(self, receivedBody: decoded) && state == .running
            }
            guard state == .running else { return 0 }
            switch outcome {
            case .taken: accepted = true
            case .refused: accepted = false
            case .failed(let why):
                decodingFailure = why
                return 0
            }
        } else {
            accepted = delegate.transfer(self, receivedBody: bytes)
            guard state == .running else { return 0 }
        }
        if accepted { return bytes.count }
        pauseReasons.insert(.noRoom)
        pausedInCurl = true
        return Curl.writePause
    }

    /// Whether a header line is a `Set-Cookie` (the name in any case).
    static func isSetCookie(_ line: UnsafeRawBufferPointer) -> Bool {
        guard line.count >= setCookie.count else { return false }
        for i in 0..<setCookie.count where line[i] | 0x20 != setCookie[i] { return false }
        return true
    }

    private static let setCookie = Array("set-cookie:".utf8)

    /// One header line. Lines after the head was delivered are trailers: not part of the
    /// head, ignored.
    func headerLineArrived(_ line: UnsafeRawBufferPointer) -> Int {
        guard state == .running else { return 0 }
        guard !headDelivered else { return line.count }
        // Paused by the caller: the line is offered again after `unpause`.
        if pauseReasons.contains(.requested) {
            pausedInCurl = true
            return Curl.writePause
        }
        // Refused for lack of room: libcurl keeps the line and offers it after `resume()`.
        if let delegate, !delegate.transfer(self, receivedHeadLine: line.count) {
            guard state == .running else { return 0 }
            pauseReasons.insert(.noRoom)
            pausedInCurl = true
            return Curl.writePause
        }
        guard state == .running else { return 0 }
        if !sawSetCookie, Self.isSetCookie(line) { sawSetCookie = true }
        headParser.consume(line: line)
        // The blank line ends a block: if it is the final response's, the client sees
        // HEADERS_RECEIVED now, not only when the first body byte comes.
        let blank = line.count <= 2 && line.allSatisfy { $0 == 13 || $0 == 10 }
        guard blank, let head = headParser.current else { return line.count }
        if head.status == 101 {
            // No request of ours asks to switch protocols (`Upgrade` is the engine's own
            // header), so what follows is not HTTP: libcurl 7.88 would read it as the
            // body of a final 101 (RFC 9110 §15.2.2: a server sends 101 only to a request
            // that asked).
            framingError = "101 Switching Protocols answers a request that asked for no protocol switch"
            return 0
        }
        if head.status >= 200 {
            // A body whose length cannot be known must not be read at all: refusing the
            // line aborts the transfer, and libcurl closes a connection whose transfer
            // failed, so nothing of it is taken for the next response.
            switch head.framing {
            case .invalid(let why):
                framingError = why
                return 0
            case .transferEncodingAndLength:
                connectionSuspect = true
            case .valid:
                break
            }
        }
        if willFollow(head) {
            redirectHead = head
            return line.count
        }
        if isFinal(head), let delegate {
            deliverHead(delegate)
            guard state == .running else { return 0 }
        }
        return line.count
    }

    /// Whether the engine follows this response: a redirect of one of the followed
    /// codes with a `Location`, when the request follows redirects.
    private func willFollow(_ head: ResponseHead) -> Bool {
        hop.followRedirects && RedirectRule.followedCodes.contains(head.status) && head.followedLocation != nil
    }

    /// Whether libcurl will hand us this block's body, judged at the blank line that ends
    /// it: not an interim 1xx, not a redirect the engine follows, not an authentication
    /// challenge libcurl may answer by retrying. When unsure it says no, and the head is
    /// delivered with the first body byte or at completion instead (libcurl skips the
    /// bodies of responses it retries).
    private func isFinal(_ head: ResponseHead) -> Bool {
        if head.status < 200 { return false }
        if head.status == 401, hop.user != nil { return false }
        if head.status == 407 { return false }
        return true
    }

    /// Progress from the xferinfo callback; non-zero aborts.
    ///
    /// libcurl calls it on every pass over the transfer — about ten times for a small
    /// GET, one of them with new figures — so the unchanged case is settled by comparing
    /// four integers, without loading the weak `delegate` (an atomic retain and release
    /// through the side table, the bulk of this callback's cost). A transfer whose
    /// delegate went away is aborted when its next body bytes arrive, at its next change
    /// of figures, or at the latest at its `delegateCheckInterval`-th unchanged report
    /// (a stalled transfer gets one every second or two).
    func progressArrived(_ p: TransferProgress) -> Int32 {
        guard state == .running else { return 1 }
        if p == lastProgress {
            unchangedProgressReports &+= 1
            if unchangedProgressReports % Transfer.delegateCheckInterval != 0 { return 0 }
            return delegate == nil ? 1 : 0
        }
        guard let delegate else { return 1 }
        lastProgress = p
        delegate.transfer(self, progressed: p)
        return state == .running ? 0 : 1
    }
}
