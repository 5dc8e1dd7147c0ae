/// The request object's life as a pure state machine: no I/O, no clock, unit-tested
/// alone. Each event is a mutating function that returns what the owner must do; the
/// owner (`HTTPRequest`) only performs those actions. One function, `move`, changes the
/// state, so every transition yields exactly one `notify`, in order.
///
/// Transitions (the state table api/openrpc.json and docs/guide/requests.md describe):
/// - UNSENT: `open` → OPENED.
/// - OPENED: `open` → OPENED again (options kept, headers and body cleared); `send` → SENT.
/// - SENT: head received → HEADERS_RECEIVED; failure → DONE; `abort` → DONE; a retry
///   → SENT again (reported once more, with the attempt's number).
/// - HEADERS_RECEIVED: first body bytes (or the end) → LOADING; failure or `abort` → DONE;
///   a retry after the response broke off → SENT.
/// - LOADING: completion, failure or `abort` → DONE; a retry after the response broke
///   off → SENT.
/// - DONE: `open` → OPENED.
/// `open` from SENT, HEADERS_RECEIVED or LOADING aborts first (→ DONE, then → OPENED).
/// A success completes through every state it skipped: a response that arrives in one
/// read still reports HEADERS_RECEIVED, LOADING and DONE.
struct RequestStateMachine {
    private(set) var state: RequestState = .unsent

    /// What the owner does, in the order given.
    enum Action: Equatable {
        /// Tell subscribers about the state just entered.
        case notify(RequestState)
        /// Stop the transfer under way; no event of it may arrive afterwards.
        case cancelTransfer
        /// Drop the response: status, headers and unread body.
        case clearResponse
        /// Drop the request's headers and form values (open clears them).
        case clearRequest
        /// Hand the configured request to the engine.
        case startTransfer
        /// Record the response head (status, headers) just received.
        case recordHead
        /// Record that the request ended without a response: status 0 and this text.
        case recordFailure(String)
        /// Answer a waiting synchronous `send`: always right after DONE is entered.
        case answerSyncSend
    }

    /// A client call made in a state that does not allow it.
    struct Misuse: Error, Equatable {
        let state: RequestState
    }

    /// The actions one event yields, in order: at most nine (`open` while in flight), kept
    /// in place rather than in an array, which cost an allocation for every event of every
    /// request (five for a plain exchange).
    struct Actions: Equatable, ExpressibleByArrayLiteral {
        static let capacity = 9
        private var storage = InlineArray<9, Action>(repeating: .startTransfer)
        private(set) var count = 0

        init() {}

        init(arrayLiteral actions: Action...) {
            for action in actions { append(action) }
        }

        var isEmpty: Bool { count == 0 }

        subscript(i: Int) -> Action {
            precondition(i < count, "Action index out of range")
            return storage[i]
        }

        mutating func append(_ action: Action) {
            precondition(count < Self.capacity, "More actions than one event yields")
            storage[count] = action
            count += 1
        }

        static func + (a: Actions, b: Actions) -> Actions {
            var all = a
            for i in 0..<b.count { all.append(b[i]) }
            return all
        }

        static func == (a: Actions, b: Actions) -> Bool {
            a.count == b.count && (0..<a.count).allSatisfy { a[$0] == b[$0] }
        }
    }

    private mutating func move(to next: RequestState, _ actions: inout Actions) {
        state = next
        actions.append(.notify(next))
    }

    mutating func open() -> Actions {
        var actions = Actions()
        if state.isInFlight { appendAbortActions(&actions) }
        actions.append(.clearRequest)
        actions.append(.clearResponse)
        move(to: .opened, &actions)
        return actions
    }

    /// The rule of `send` (and `sendData`, `sendWithFile`): OPENED only. Asked before
    /// the transfer starts, so that a refused start changes nothing.
    func checkSend() throws(Misuse) {
        guard state == .opened else { throw Misuse(state: state) }
    }

    mutating func send() throws(Misuse) -> Actions {
        try checkSend()
        var actions = Actions()
        actions.append(.clearResponse)
        move(to: .sent, &actions)
        actions.append(.startTransfer)
        return actions
    }

    /// Another attempt of the same send begins (a retry): SENT again, reported again so
    /// that subscribers see each attempt. From SENT nothing of the previous attempt was
    /// recorded; from HEADERS_RECEIVED or LOADING (a response that broke off, retried
    /// because the interceptor asked) what it recorded is dropped.
    mutating func retrying() -> Actions {
        guard state.isInFlight else { return [] }
        var actions = Actions()
        if state != .sent { actions.append(.clearResponse) }
        move(to: .sent, &actions)
        return actions
    }

    /// The final response's head arrived.
    mutating func headReceived() -> Actions {
        guard state == .sent else { return [] }
        var actions = Actions()
        appendHeadReceived(&actions)
        return actions
    }

    /// Body bytes arrived (the head was reported before them).
    mutating func bodyReceived() -> Actions {
        guard state == .headersReceived else { return [] }
        var actions = Actions()
        move(to: .loading, &actions)
        return actions
    }

    /// The transfer ended well. A head is always delivered before this.
    mutating func completed() -> Actions {
        guard state.isInFlight else { return [] }
        var actions = Actions()
        if state == .sent { appendHeadReceived(&actions) }
        if state == .headersReceived { move(to: .loading, &actions) }
        move(to: .done, &actions)
        actions.append(.answerSyncSend)
        return actions
    }

    /// The transfer ended without a (complete) response.
    mutating func failed(_ text: String) -> Actions {
        guard state.isInFlight else { return [] }
        var actions = Actions()
        actions.append(.clearResponse)
        actions.append(.recordFailure(text))
        move(to: .done, &actions)
        actions.append(.answerSyncSend)
        return actions
    }

    /// `abort` (api/openrpc.json): true only while a transfer is under way.
    mutating func abort() -> (aborted: Bool, actions: Actions) {
        guard state.isInFlight else { return (false, []) }
        var actions = Actions()
        appendAbortActions(&actions)
        return (true, actions)
    }

    private mutating func appendAbortActions(_ actions: inout Actions) {
        actions.append(.cancelTransfer)
        actions.append(.clearResponse)
        actions.append(.clearRequest)
        actions.append(.recordFailure("Aborted"))
        move(to: .done, &actions)
        actions.append(.answerSyncSend)
    }

    /// The final head's actions (`headReceived`, and `completed` from SENT).
    private mutating func appendHeadReceived(_ actions: inout Actions) {
        actions.append(.recordHead)
        move(to: .headersReceived, &actions)
    }

    /// Whether pre-send options may be changed now.
    var acceptsOptions: Bool { state == .unsent || state == .opened }

    /// Whether request headers may be set now (between `open` and `send`).
    var acceptsHeaders: Bool { state == .opened }
}
