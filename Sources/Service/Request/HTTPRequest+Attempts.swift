import EventLoop
import Foundation
import HTTPEngine
import JSON
import JSONRPC

/// How one `send` becomes one or more attempts: the interceptor's questions before each
/// attempt and after a failed one (`Interceptor`; docs/guide/interception-and-retries.md), the
/// retry policy's backoff (`RetryPolicy`), and the notices an interceptor gets. The
/// request stays SENT between attempts; a retry is reported as SENT again with its
/// attempt number, and only the last attempt's response is ever recorded.
///
/// Between attempts (waiting for an answer or a backoff) the request counts as in
/// flight, and `abort`, `open` and `release` stop the wait as they stop a transfer.
extension HTTPRequest {
    /// What the request waits for between attempts.
    enum Between {
        case asking(ServerQuestions.Ticket)
        case backingOff(EventLoop.Timer)

        func cancel() {
            switch self {
            case .asking(let ticket): ticket.cancel()
            case .backingOff(let timer): timer.close()
            }
        }
    }

    /// At most this many attempts per send when an interceptor asks for retries.
    static let maxInterceptedAttempts = 10

    /// The principal's interceptor, when it wants `event` about this request.
    func interceptor(for event: InterceptEvent) -> Interceptor? {
        guard let i = principal.interceptor, i.wants(event, url: planned?.url ?? url) else { return nil }
        return i
    }

    // MARK: Starting an attempt

    /// Starts attempt `attempt` of `planned`, asking the interceptor first when it
    /// wants to be asked.
    func beginAttempt() {
        guard let request = planned else { return }
        guard let i = interceptor(for: .willSendRequest), let session = i.session else {
            return launch(request)
        }
        let params: JSONValue = [
            "request": .string(handle), "attempt": .int(Int64(attempt)), "method": .string(request.method),
            "url": .string(request.url), "headers": .object(Self.headerObject(request.headers)),
        ]
        let ticket = env.questions.ask(session.connection, InterceptEvent.willSendRequest.rawValue, params,
                                       timeout: i.timeout) { [weak self] answer in
            self?.answeredWillSend(answer)
        }
        if between == nil, transfer == nil, state == .sent { between = .asking(ticket) }
    }

    private func answeredWillSend(_ answer: ServerQuestions.Answer) {
        between = nil
        guard state == .sent, let request = planned else { return }
        switch answer {
        case .none(let why):
            env.log("willSendRequest for \(handle): \(why); sending it unchanged")
            launch(request)
        case .result(.bool(true)):
            launch(request)
        case .result(.bool(false)):
            finish(failure: "Cancelled by interceptor", reason: "cancelled")
        case .result(.object(let replacement)):
            do {
                let replaced = try apply(replacement, to: request)
                try heldSend.resize(to: HeldBytes.ofSend(replaced), for: "willSendRequest's replacement")
                planned = replaced
                launch(replaced)
            } catch {
                finish(failure: "Replacement refused by the server: \(error.explanation)", reason: "refused")
            }
        case .result(let other):
            env.log("willSendRequest for \(handle): the answer \(String(decoding: JSON.encode(other), as: UTF8.self).prefix(80)) is not true, false or an object; sending it unchanged")
            launch(request)
        }
    }

    /// Hands `request` to the engine; a refusal ends the request as a failure.
    func launch(_ request: TransferRequest) {
        do {
            try startTransfer(request)
        } catch {
            finish(failure: "Cannot send: \((error as? TransferFailure)?.text ?? String(describing: error))",
                   reason: (error as? TransferFailure).map(FailureReason.word) ?? "refused")
        }
    }

    /// Makes the attempt's transfer and starts it; throws what the engine refused.
    func startTransfer(_ request: TransferRequest) throws {
        let t = Transfer(request: request, delegate: self)
        try env.engine.start(t)
        if pausedByClient { t.pause() }
        transfer = t
        receivedBytes = 0
    }

    /// The request as the interceptor's replacement has it: every part checked as a
    /// client's own would be (`HTTPSyntax`), so an interceptor can send nothing its
    /// principal could not. The egress policy runs in the engine, on the new URL.
    func apply(_ o: JSONObject, to request: TransferRequest) throws(RPCError) -> TransferRequest {
        let known: Set<String> = ["url", "method", "headers", "body", "bodyBase64"]
        if let unknown = o.keys.first(where: { !known.contains($0) }) {
            throw RPCError.invalidParams("unknown replacement member '\(unknown)'")
        }
        var r = request
        if let v = o["url"] {
            guard let url = v.stringValue else { throw RPCError.invalidParams("'url' must be a string") }
            try HTTPSyntax.checkURL(url)
            let scheme = url.prefix { $0 != ":" }.lowercased()
            guard scheme == "http" || scheme == "https" else {
                throw RPCError.invalidParams("only http and https URLs are sent, not '\(scheme)'")
            }
            r.url = url
        }
        if let v = o["method"] {
            guard let m = v.stringValue else { throw RPCError.invalidParams("'method' must be a string") }
            r.method = try HTTPSyntax.method(m)
        }
        if let v = o["headers"] {
            guard let given = v.objectValue else { throw RPCError.invalidParams("'headers' must be an object") }
            var headers: [(name: String, value: String)] = []
            for m in given.members {
                guard let value = m.value.stringValue else {
                    throw RPCError.invalidParams("header '\(m.key)' must have a string value")
                }
                try HTTPSyntax.checkHeader(m.key, value)
                headers.append((m.key, value))
            }
            r.headers = headers
        }
        switch try BodyParams.body(Params(o)) {
        case .none: break
        case let body: r.body = body
        }
        return r
    }

    // MARK: After an attempt

    /// The attempt failed with no response, or with one whose body broke off after the
    /// head (`afterHead`: the seed's "incomplete response"). Asks the interceptor, or —
    /// for no response only — the retry policy, whether to try again; otherwise the
    /// request ends with the failure, and an interceptor that asks no question is told
    /// `didFailWithError`. A retry after the head drops what the broken response had
    /// recorded (`RequestStateMachine.retrying`).
    func attemptFailed(_ failure: TransferFailure, afterHead: Bool = false) {
        let reason = FailureReason.word(failure)
        let request = planned
        // An interceptor that takes this question never hears didFailWithError
        // (docs/guide/interception-and-retries.md): not even when the attempts run out.
        let asked = interceptor(for: .shouldContinueAfterFailWithError)
        if attempt >= Self.maxInterceptedAttempts, asked != nil {
            env.log("\(handle): \(attempt) attempts, the most an interceptor may ask for; failing")
            return finish(failure: failure.text, reason: reason)
        }
        if let i = asked, let session = i.session, let request {
            let params: JSONValue = [
                "request": .string(handle), "attempt": .int(Int64(attempt)),
                "error": ["reason": .string(reason), "message": .string(failure.text)],
                "method": .string(request.method), "url": .string(request.url),
            ]
            between = .asking(env.questions.ask(session.connection, InterceptEvent.shouldContinueAfterFailWithError.rawValue,
                                                params, timeout: i.timeout) { [weak self] answer in
                self?.answeredShouldContinue(answer, failure)
            })
            return
        }
        if !afterHead, let policy = retryPolicy, let request,
           policy.retries(afterFailure: reason, attempt: attempt, method: request.method) {
            return backOff(policy, retryAfter: nil)
        }
        tell(.didFailWithError, ["request": .string(handle), "error": ["reason": .string(reason), "message": .string(failure.text)]])
        finish(failure: failure.text, reason: FailureReason.word(failure))
    }

    private func answeredShouldContinue(_ answer: ServerQuestions.Answer, _ failure: TransferFailure) {
        between = nil
        guard state.isInFlight, let request = planned else { return }
        switch answer {
        case .result(.bool(true)):
            retry()
        case .result(.object(let replacement)):
            do {
                let replaced = try apply(replacement, to: request)
                try heldSend.resize(to: HeldBytes.ofSend(replaced), for: "shouldContinueAfterFailWithError's replacement")
                planned = replaced
                retry()
            } catch {
                finish(failure: "Replacement refused by the server: \(error.explanation)", reason: "refused")
            }
        case .none(let why):
            env.log("shouldContinueAfterFailWithError for \(handle): \(why); not retrying")
            finish(failure: failure.text, reason: FailureReason.word(failure))
        default:
            finish(failure: failure.text, reason: FailureReason.word(failure))
        }
    }

    /// Waits as `policy` says, then retries.
    func backOff(_ policy: RetryPolicy, retryAfter: Double?) {
        let seconds = policy.delay(after: attempt, retryAfter: retryAfter, jitter: Double.random(in: 0.5...1))
        guard let timer = try? EventLoop.Timer(loop: env.loop) else { return retry() }
        between = .backingOff(timer)
        timer.start(timeout: UInt64(seconds * 1000)) { [weak self] in
            timer.close()
            guard let self else { return }
            between = nil
            retry()
        }
    }

    /// The next attempt, reported as SENT with its number.
    func retry() {
        guard state.isInFlight else { return }
        attempt += 1
        perform(machine.retrying())
        beginAttempt()
    }

    /// Whether a response head with this status is thrown away for a retry; if so, the
    /// transfer is discarded (its body never reaches the buffer) and the retry planned.
    func discardsForRetry(_ t: Transfer, _ head: ResponseHead) -> Bool {
        guard let policy = retryPolicy, let request = planned,
              policy.retries(status: head.status, attempt: attempt, method: request.method) else { return false }
        let after = head.headers.firstValue(of: "retry-after").flatMap { RetryPolicy.retryAfter($0, now: Date()) }
        discarding = t
        // libcurl forbids removing a transfer from inside its callbacks: next turn.
        env.soon { [weak self] in self?.dropDiscarded(t, policy: policy, retryAfter: after) }
        return true
    }

    /// Ends a discarded attempt's transfer (if it has not ended) and backs off.
    func dropDiscarded(_ t: Transfer, policy: RetryPolicy? = nil, retryAfter: Double? = nil) {
        guard endDiscarded(t), let policy = policy ?? retryPolicy else { return }
        backOff(policy, retryAfter: retryAfter)
    }

    /// Ends a discarded attempt's transfer (if it has not ended); true when the send is
    /// still waiting for its next attempt.
    func endDiscarded(_ t: Transfer) -> Bool {
        guard discarding === t else { return false }
        discarding = nil
        if transfer === t {
            env.engine.cancel(t)
            transfer = nil
        }
        return state == .sent
    }

    // MARK: Notices

    /// Sends an interceptor notice, when it wants this one. The parameters are built
    /// only then: every response would otherwise pay for a headers object nobody reads.
    func tell(_ event: InterceptEvent, _ params: @autoclosure () -> JSONValue) {
        guard let i = interceptor(for: event), let session = i.session else { return }
        session.connection.notify(event.rawValue, params())
    }

    /// Body bytes for `didReceiveData`: gathered and sent once per turn of the loop, so a
    /// fast transfer costs the interceptor few messages; the request's own buffer has
    /// its copy whatever the interceptor does.
    func noticeData(_ bytes: UnsafeRawBufferPointer) {
        guard interceptor(for: .didReceiveData) != nil else { return }
        let wasEmpty = pendingNoticeData.isEmpty
        pendingNoticeData.append(contentsOf: bytes)
        guard wasEmpty else { return }
        env.soon { [weak self] in self?.flushNoticeData() }
    }

    func flushNoticeData() {
        guard !pendingNoticeData.isEmpty else { return }
        let data = pendingNoticeData
        pendingNoticeData = []
        tell(.didReceiveData, ["request": .string(handle), "bytes": .int(Int64(data.count)),
                               "dataBase64": .string(Data(data).base64EncodedString())])
    }

    /// Ends the send without a response: DONE, status 0, `text`; `reason` is the word
    /// the access log's entry (and so `/metrics`) gives it.
    func finish(failure text: String, reason: String) {
        between = nil
        failureReason = reason
        perform(machine.failed(text))
    }

    /// Headers as a JSON object: repeated names (in any case) joined with ", " under
    /// the first spelling, in the order they first came (`HeaderFields.groupedByName`).
    /// The one form every header list takes on the wire to clients (fetch's result, the
    /// interceptor's questions and notices).
    static func headerObject(_ headers: HeaderFields) -> JSONObject {
        let groups = headers.groupedByName()
        return JSONObject(distinctMembers: (0..<groups.count).map { g in
            var values: [String] = []
            groups.forEachField(ofGroup: g) { values.append(headers.value(at: $0)) }
            return (headers.name(at: groups.first(ofGroup: g)), .string(values.joined(separator: ", ")))
        })
    }

    static func headerObject(_ headers: [(name: String, value: String)]) -> JSONObject {
        headerObject(HeaderFields(headers))
    }

    /// The same object written in place (fetch's result): `headerObject`'s members, in
    /// its order, straight from the fields' bytes.
    static func writeHeaderObject(_ headers: HeaderFields, into object: inout JSONObjectWriter) {
        let groups = headers.groupedByName()
        for g in 0..<groups.count {
            let first = groups.first(ofGroup: g)
            // A name that came once, ASCII like its value (nearly every field): one member
            // straight from its bytes.
            if groups.next(after: first) == nil,
               headers.withASCIIField(first, { name, value in object.addString(utf8Key: name, utf8Value: value) }) {
                continue
            }
            headers.withNameUTF8(first) { name in
                object.addString(utf8Key: name) { append in
                    groups.forEachField(ofGroup: g) { field in
                        if field != first {
                            append(UnsafeBufferPointer(start: valueSeparator.utf8Start, count: valueSeparator.utf8CodeUnitCount))
                        }
                        headers.withValueUTF8(field, append)
                    }
                }
            }
        }
    }

    /// Between the values of a repeated name.
    private static let valueSeparator: StaticString = ", "
}
