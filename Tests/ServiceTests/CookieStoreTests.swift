import Foundation
import HTTPEngine
import Testing
@testable import Service
import TestSupport

/// The cookie store on disk: made in a 0700 directory, written atomically with mode
/// 0600, read back without expired cookies or lines that are not cookies, refused when
/// others could have touched it.
@Suite struct CookieStoreTests {
    private func mode(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? -1
    }

    private let now = Int64(Date().timeIntervalSince1970)

    @Test func theDirectoryIsMade0700AndTheStoreWritten0600Atomically() throws {
        let base = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: base) }
        let store = try CookieStore(directory: base + "/state/xhrpc")
        #expect(try mode(base + "/state/xhrpc") == 0o700)
        let path = store.path(for: "local")
        #expect(path == base + "/state/xhrpc/cookies-local.txt")

        let first = CookieStore.contents([Cookie(domain: "a.test", expires: now + 60, name: "n", value: "1")], principal: "local")
        try store.save(first, principal: "local")
        #expect(try mode(path) == 0o600)
        #expect(FileManager.default.contents(atPath: path).map([UInt8].init) == first)

        // A reader that opened the old store keeps reading all of it: the new one
        // arrived by rename, not by rewriting the old file in place.
        let old = try #require(FileHandle(forReadingAtPath: path))
        defer { try? old.close() }
        let second = CookieStore.contents([Cookie(domain: "a.test", expires: now + 60, name: "n", value: "2")], principal: "local")
        try store.save(second, principal: "local")
        #expect(try old.readToEnd().map([UInt8].init) == first)
        #expect(FileManager.default.contents(atPath: path).map([UInt8].init) == second)
        #expect(try mode(path) == 0o600)
        // No temporary file is left behind.
        #expect(try FileManager.default.contentsOfDirectory(atPath: base + "/state/xhrpc") == ["cookies-local.txt"])
    }

    @Test func principalNamesCannotLeaveTheDirectory() throws {
        let base = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: base) }
        let store = try CookieStore(directory: base)
        #expect(store.path(for: "../x") == base + "/cookies-%2E%2E%2Fx.txt")
        #expect(store.path(for: "a b.c") == base + "/cookies-a%20b%2Ec.txt")
    }

    @Test func loadingKeepsLiveCookiesOnly() throws {
        let base = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: base) }
        let store = try CookieStore(directory: base)
        let text = """
            # Netscape HTTP Cookie File

            a.test\tFALSE\t/\tFALSE\t\(now + 600)\tlive\t1
            #HttpOnly_a.test\tFALSE\t/\tFALSE\t\(now + 600)\thidden\t2
            a.test\tFALSE\t/\tFALSE\t\(now - 1)\texpired\t3
            a.test\tFALSE\t/\tFALSE\t0\tsession\t4
            this is not a cookie
            \u{1}\u{2}garbage\t\t
            """
        #expect(FileManager.default.createFile(atPath: store.path(for: "p"), contents: Data(text.utf8),
                                               attributes: [.posixPermissions: 0o600]))
        guard case .cookies(let cookies, let skipped) = store.load(principal: "p", now: now) else {
            Issue.record("not loaded")
            return
        }
        #expect(cookies.map(\.name) == ["live", "hidden"])
        #expect(cookies.last?.httpOnly == true)
        #expect(skipped == 2)
        #expect(store.load(principal: "nobody", now: now) == .missing)
    }

    @Test func aStoreOthersCouldTouchIsRefused() throws {
        let base = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: base) }
        let store = try CookieStore(directory: base)
        let line = Data("a.test\tFALSE\t/\tFALSE\t\(now + 600)\tn\tv\n".utf8)
        #expect(FileManager.default.createFile(atPath: store.path(for: "wide"), contents: line,
                                               attributes: [.posixPermissions: 0o644]))
        guard case .refused(let why) = store.load(principal: "wide", now: now) else {
            Issue.record("a 0644 store was loaded")
            return
        }
        #expect(why.contains("mode 644, wider than 0600"))

        #expect(FileManager.default.createFile(atPath: base + "/elsewhere", contents: line, attributes: [.posixPermissions: 0o600]))
        try FileManager.default.createSymbolicLink(atPath: store.path(for: "link"), withDestinationPath: base + "/elsewhere")
        guard case .refused(let linkWhy) = store.load(principal: "link", now: now) else {
            Issue.record("a symbolic link was followed")
            return
        }
        #expect(linkWhy.contains("symbolic link"))

        try FileManager.default.createDirectory(atPath: store.path(for: "dir"), withIntermediateDirectories: false)
        guard case .refused = store.load(principal: "dir", now: now) else {
            Issue.record("a directory was read as a store")
            return
        }

        // The next save replaces a refused store with a private one.
        try store.save(CookieStore.contents([], principal: "wide"), principal: "wide")
        #expect(try mode(store.path(for: "wide")) == 0o600)
    }

    @Test func aStateDirectoryThatIsAFileIsAStartupError() throws {
        let base = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: base) }
        #expect(FileManager.default.createFile(atPath: base + "/file", contents: nil))
        #expect(throws: StartupError.self) { try CookieStore(directory: base + "/file") }
    }
}
