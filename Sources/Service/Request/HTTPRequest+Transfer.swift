import Foundation
import HTTPEngine
import JSON
import JSONRPC

/// What the request does with its state machine's actions and with its transfer's
/// events (`TransferDelegate`): where the response, the unread body and the
/// principal's counts change.
extension HTTPRequest {
    // MARK: Performing the machine's actions

    func perform(_ actions: RequestStateMachine.Actions) {
        for i in 0..<actions.count {
            switch actions[i] {
            case .notify(let s):
                touch()
                if s == .opened {
                    // A new exchange: no attempt yet (an abort just reported was the old one's).
                    attempt = 0
                    planned = nil
                    heldSend.releaseAll()
                    dropDownload()
                }
                if s == .opened || s == .done { pausedByClient = false }
                if s == .done {
                    // No attempt follows: a file to send is closed now, not at release.
                    planned?.body = .none
                    finishDownload()
                    hub.flushProgress(of: self)
                    if let started = sentAt {
                        sentAt = nil
                        env.finished(accessLogEntry(since: started))
                    }
                }
                // Reaching DONE ends a transfer; `open` discards unread bytes.
                env.objectMayHaveSettled()
                hub.stateChanged(self, to: s)
                if s == .done, let done = onDone {
                    onDone = nil
                    done()
                }
            case .cancelTransfer:
                if let t = transfer {
                    env.engine.cancel(t)
                    transferEnded(t)
                }
                transfer = nil
                stopAttempts()
            case .clearResponse:
                status = 0
                statusText = ""
                responseHeaders = []
                pendingHead = nil
                heldHead.releaseAll()
                body.removeAll()
                progress = TransferProgress(uploaded: 0, uploadTotal: 0, downloaded: 0, downloadTotal: 0)
                progressCursors = [:]
            case .clearRequest:
                clearHeaders()
                serializer.clear()
            case .startTransfer:
                break  // started before the transition, so a refused start changes nothing
            case .recordHead:
                if let head = pendingHead {
                    status = head.status
                    statusText = head.statusText
                    responseHeaders = head.headers
                }
            case .recordFailure(let text):
                status = 0
                statusText = text
            case .answerSyncSend:
                if let t = transfer { lastTransfer = t }
                transfer = nil
                if let call = syncCall {
                    syncCall = nil
                    // The machine answers right after entering DONE; an `open` that
                    // aborted the send is in OPENED by now, which the send never was.
                    replySummary(to: call, state: .done)
                }
            }
        }
    }

    // MARK: TransferDelegate

    func transfer(_ t: Transfer, receivedHead head: ResponseHead) {
        if discardsForCredentials(t, head) || discardsForRetry(t, head) { return }
        pendingHead = head
        downloadHeadArrived(head)
        perform(machine.headReceived())
        tell(.didReceiveResponse, [
            "request": .string(handle), "status": .int(Int64(head.status)), "statusText": .string(head.statusText),
            "headers": .object(Self.headerObject(head.headers)),
            "expectedContentLength": .int(Self.expectedLength(head.headers)),
        ])
    }

    /// The Content-Length of a head, or -1 when it has none that can be read.
    static func expectedLength(_ headers: HeaderFields) -> Int64 {
        headers.firstValue(of: "Content-Length").flatMap { Int64($0.trimmingCharacters(in: .whitespaces)) } ?? -1
    }

    /// A head's line counts in the budget as it arrives; while the budget is spent the
    /// transfer pauses before keeping it, as it does for body bytes.
    func transfer(_ t: Transfer, receivedHeadLine bytes: Int) -> Bool {
        if t === discarding { return true }
        if principal.budgetExhausted {
            if failsWhenBufferFull {
                return fail(t, "Principal '\(principal.name)' holds \(principal.limits.bufferedBytes) bytes, its limit; read or release some requests first")
            }
            principal.waitForBudget(self)
            return false
        }
        heldHead.add(bytes)
        return true
    }

    func transfer(_ t: Transfer, receivedBody bytes: UnsafeRawBufferPointer) -> Bool {
        // A response thrown away for a retry: paused until it is cancelled.
        if t === discarding { return false }
        if let max = settings.maxResponseBytes, receivedBytes + bytes.count > max {
            return fail(t, "The response body is larger than \(max) bytes (--max-response-bytes)")
        }
        if failsWhenBufferFull, body.count + bytes.count > settings.maxBufferBytes {
            return fail(t, "The response body is larger than \(settings.maxBufferBytes) bytes; read it with the request object API")
        }
        // A download's body goes to its file: no buffer, no budget.
        if let file = download { return downloadReceived(t, file, bytes) }
        if principal.budgetExhausted {
            if failsWhenBufferFull {
                return fail(t, "Principal '\(principal.name)' holds \(principal.limits.bufferedBytes) unread bytes, its limit; read or release some requests first")
            }
            principal.waitForBudget(self)
            return false
        }
        if body.count >= settings.maxBufferBytes { return false }
        body.append(bytes)
        noticeData(bytes)
        receivedBytes += bytes.count
        principal.usage.httpBytesReceived += UInt64(bytes.count)
        perform(machine.bodyReceived())
        return true
    }

    /// Ends the transfer as failed with `text` (status 0). libcurl forbids removing a
    /// transfer from inside its callback: the transfer is paused now (the `false`
    /// returned) and ended on the next turn.
    func fail(_ t: Transfer, _ text: String) -> Bool {
        env.soon { [weak self] in
            guard let self, transfer === t else { return }
            perform([.cancelTransfer] + machine.failed(text))
        }
        return false
    }

    /// Resumes a paused transfer once both this request's buffer and its principal's
    /// total have room again.
    func budgetFreed() {
        guard let t = transfer, t.pauseReasons.contains(.noRoom), body.count < settings.maxBufferBytes else { return }
        if principal.budgetExhausted {
            principal.waitForBudget(self)
        } else {
            t.resume()
        }
    }


    func transfer(_ t: Transfer, progressed p: TransferProgress) {
        progress = downloadAdjusted(p)
        hub.progressed(self)
    }

    func transfer(_ t: Transfer, completedWith failure: TransferFailure?) {
        lastTransfer = t
        transferEnded(t)
        if t === discarding {
            // Its retry is planned already (`discardsForRetry`).
            transfer = nil
            return
        }
        if let failure {
            // No response, or one cut short after its head: another attempt may follow,
            // and the interceptor hears of it either way (`attemptFailed`).
            let sent = state == .sent
            transfer = nil
            if sent, answersTunnelChallenge(t) { return }
            if !sent { flushNoticeData() }  // the data that came, then its failure
            attemptFailed(failure, afterHead: !sent)
        } else if let why = downloadShortfall ?? placeDownload() {
            perform(machine.failed(why))
        } else {
            flushNoticeData()
            tell(.didFinishLoading, ["request": .string(handle)])
            perform(machine.completed())
        }
    }

    /// The access log's line for the exchange that just ended.
    private func accessLogEntry(since started: Double) -> AccessLogEntry {
        // A DONE with status 0 that no failure explained is an abort (`abort`, a stop).
        let failure = status == 0 ? failureReason ?? "aborted" : nil
        failureReason = nil
        return AccessLogEntry(principal: principal.name, method: method, url: displayURL, status: status,
                              reason: status == 0 ? statusText : nil, bytesIn: receivedBytes, bytesOut: sentBytes,
                              durationMs: Int(((env.clock.now() - started) * 1000).rounded()), attempts: max(attempt, 1),
                              failure: failure)
    }

    /// A transfer stopped for good; if it used the jar, it may have stored cookies, and
    /// if a head said `Set-Cookie`, the jar is counted again (`Principal.countCookies`:
    /// one listing of the jar, so only after a transfer that can have grown it).
    private func transferEnded(_ t: Transfer) {
        sentBytes = Int(max(0, progress.uploaded))
        principal.usage.httpBytesSent += UInt64(max(0, progress.uploaded))
        guard t.request.cookieJar != nil else { return }
        if t.sawSetCookie { principal.countCookies() }
        env.cookiesMayHaveChanged(for: principal)
    }
}
