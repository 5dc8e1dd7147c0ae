import CCurl
import CShims
import EventLoop
import Foundation
import HTTPEngine
import Testing

/// Throughput of 1 KiB GETs, sequential and 64 in flight, against a local nginx (the
/// fixture upstream when nginx is missing), through the engine and — the ceiling, in the
/// same run, alternately, since this machine drifts between runs — through a plain
/// `curl_multi_poll` loop. A sanity figure printed for people, not a timed test: it
/// asserts only that every request succeeded. Runs only with `XHRPC_PERF=1`, best in
/// release:
///
///     XHRPC_PERF=1 swift test -c release -Xswiftc -enable-testing --filter PerformanceSanity
@Suite(.enabled(if: ProcessInfo.processInfo.environment["XHRPC_PERF"] == "1"))
struct PerformanceSanityTests {
    /// Starts its next request from each completion, keeping `inFlight` outstanding.
    final class Driver: TransferDelegate {
        let engine: TransferEngine
        let url: String
        var remaining: Int
        var completed = 0
        var failures = 0
        var bytes = 0
        var live: [ObjectIdentifier: Transfer] = [:]

        init(engine: TransferEngine, url: String, total: Int) {
            self.engine = engine
            self.url = url
            remaining = total
        }

        func launch() {
            guard remaining > 0 else { return }
            remaining -= 1
            let t = Transfer(request: TransferRequest(url: url), delegate: self)
            do {
                try engine.start(t)
                live[ObjectIdentifier(t)] = t
            } catch {
                failures += 1
            }
        }

        func transfer(_ t: Transfer, receivedHead head: ResponseHead) {
            if head.status != 200 { failures += 1 }
        }
        func transfer(_ t: Transfer, receivedBody b: UnsafeRawBufferPointer) -> Bool {
            bytes += b.count
            return true
        }
        func transfer(_ t: Transfer, progressed p: TransferProgress) {}
        func transfer(_ t: Transfer, completedWith failure: TransferFailure?) {
            live[ObjectIdentifier(t)] = nil
            completed += 1
            if failure != nil { failures += 1 }
            launch()
        }
    }

    /// nginx on a free loopback port serving `/1k`, or nil when nginx is not installed.
    final class Nginx {
        let process = Process()
        let port: Int
        let dir: String

        init?() {
            guard FileManager.default.isExecutableFile(atPath: "/usr/sbin/nginx") else { return nil }
            dir = NSTemporaryDirectory() + "xhrpc-nginx-\(UUID().uuidString)"
            try? FileManager.default.createDirectory(atPath: dir + "/logs", withIntermediateDirectories: true)
            try? Data(repeating: 0x61, count: 1024).write(to: URL(fileURLWithPath: dir + "/1k"))
            port = ConnectFailureTests.closedPort()  // free a moment ago; nginx cannot report port 0
            let conf = """
                daemon off; worker_processes 1; pid \(dir)/nginx.pid;
                error_log \(dir)/logs/error.log crit;
                events { worker_connections 1024; }
                http {
                    access_log off; keepalive_requests 1000000; keepalive_timeout 60s;
                    client_body_temp_path \(dir); proxy_temp_path \(dir); fastcgi_temp_path \(dir);
                    uwsgi_temp_path \(dir); scgi_temp_path \(dir);
                    server { listen 127.0.0.1:\(port) backlog=1024; root \(dir); }
                }
                """
            try? conf.write(toFile: dir + "/nginx.conf", atomically: true, encoding: .utf8)
            process.executableURL = URL(fileURLWithPath: "/usr/sbin/nginx")
            process.arguments = ["-c", dir + "/nginx.conf", "-p", dir]
            do { try process.run() } catch { return nil }
        }

        func stop() {
            // SIGTERM to the master (which handles signals whatever mask it inherited).
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
            try? FileManager.default.removeItem(atPath: dir)
        }
    }

    func measure(_ h: Harness, url: String, total: Int, inFlight: Int) -> Double {
        let d = Driver(engine: h.engine, url: url, total: total)
        let start = Date()
        for _ in 0..<inFlight { d.launch() }
        h.run(seconds: 120) { d.completed == total }
        let seconds = Date().timeIntervalSince(start)
        #expect(d.completed == total)
        #expect(d.failures == 0)
        #expect(d.bytes == total * 1024)
        return Double(d.completed) / seconds
    }

    /// The same workload on libcurl alone: `inFlight` easy handles re-added as they
    /// finish, driven by `curl_multi_perform` + `curl_multi_poll`.
    func measureDirect(url: String, total: Int, inFlight: Int) -> Double {
        guard let m = curl_multi_init() else { return 0 }
        defer { curl_multi_cleanup(m) }
        _ = xh_multi_setopt_long(m, CURLMOPT_MAXCONNECTS, 256)
        final class Count { var bytes = 0 }
        let count = Count()
        let sink: curl_write_callback = { _, size, n, userp in
            Unmanaged<Count>.fromOpaque(userp!).takeUnretainedValue().bytes += size * n
            return size * n
        }
        var easies: [UnsafeMutableRawPointer] = []
        for _ in 0..<inFlight {
            guard let e = curl_easy_init() else { return 0 }
            _ = xh_easy_setopt_str(e, CURLOPT_URL, url)
            _ = xh_easy_setopt_long(e, CURLOPT_NOSIGNAL, 1)
            _ = xh_easy_setopt_write_cb(e, CURLOPT_WRITEFUNCTION, sink)
            _ = xh_easy_setopt_ptr(e, CURLOPT_WRITEDATA, Unmanaged.passUnretained(count).toOpaque())
            easies.append(e)
        }
        defer { for e in easies { curl_multi_remove_handle(m, e); curl_easy_cleanup(e) } }
        let start = Date()
        var launched = 0, completed = 0, failed = 0
        for e in easies where launched < total { curl_multi_add_handle(m, e); launched += 1 }
        while completed < total, Date().timeIntervalSince(start) < 120 {
            var running: Int32 = 0
            curl_multi_perform(m, &running)
            var left: Int32 = 0
            while let msg = curl_multi_info_read(m, &left) {
                guard msg.pointee.msg == CURLMSG_DONE, let e = msg.pointee.easy_handle else { continue }
                if msg.pointee.data.result != CURLE_OK { failed += 1 }
                completed += 1
                curl_multi_remove_handle(m, e)
                if launched < total { curl_multi_add_handle(m, e); launched += 1 }
            }
            curl_multi_poll(m, nil, 0, 1000, nil)
        }
        let seconds = Date().timeIntervalSince(start)
        #expect(completed == total && failed == 0 && count.bytes == total * 1024)
        return Double(completed) / seconds
    }

    @Test func oneKiBGetsPerSecond() throws {
        let h = try Harness()
        let nginx = Nginx()
        defer { nginx?.stop() }
        let url: String
        if let nginx {
            url = "http://127.0.0.1:\(nginx.port)/1k"
            // Wait for nginx to listen: retry one request until it answers.
            var up = false
            for _ in 0..<50 where !up {
                let d = Driver(engine: h.engine, url: url, total: 1)
                d.launch()
                h.run(seconds: 1) { d.completed == 1 }
                up = d.failures == 0 && d.completed == 1
                if !up { h.idle(seconds: 0.1) }
            }
            #expect(up, "nginx did not start")
        } else {
            url = h.url("/bytes/1024")
        }
        _ = measure(h, url: url, total: 2000, inFlight: 8)  // warm up
        var lines: [String] = []
        for round in 1...3 {
            let seq = measure(h, url: url, total: 10_000, inFlight: 1)
            let seqDirect = measureDirect(url: url, total: 10_000, inFlight: 1)
            let par = measure(h, url: url, total: 50_000, inFlight: 64)
            let parDirect = measureDirect(url: url, total: 50_000, inFlight: 64)
            lines.append("round \(round): sequential \(Int(seq)) req/s (libcurl alone \(Int(seqDirect)), "
                         + "ratio \(String(format: "%.2f", seq / seqDirect))); 64 in flight \(Int(par)) req/s "
                         + "(libcurl alone \(Int(parDirect)), ratio \(String(format: "%.2f", par / parDirect)))")
        }
        print("1 KiB GETs from \(nginx == nil ? "the fixture upstream" : "nginx") through TransferEngine:\n" + lines.joined(separator: "\n"))
        #expect(try h.finish() == [])
    }
}
