import EventLoop
import Foundation
import HTTPEngine
import Logging
import Testing
@testable import Service
import TestSupport

/// Persistence of a principal's jar: persistent cookies are saved and loaded at the
/// next start, session cookies never are; clearing memory only leaves the store for the
/// next start, clearing the store empties it at once.
@Suite struct CookiePersistenceTests {
    private let now = Int64(Date().timeIntervalSince1970)

    /// One "run" of a server: a loop, a principal and the persistence, closed at the end
    /// with no handle left.
    private func run(_ dir: String, _ body: (Principal, CookiePersistence, Loop) throws -> Void) throws {
        _ = TransferEngine.globalInit()
        let loop = try Loop()
        let p = try Principal(name: "local")
        let persistence = try CookiePersistence(stateDirectory: dir, loop: loop, logger: Logger(label: "test"))
        persistence.attach(p)
        try body(p, persistence, loop)
        persistence.close()
        loop.run()
        #expect(loop.handleNames() == [])
        try loop.close()
    }

    @Test func persistentCookiesSurviveARestartAndSessionCookiesDoNot() throws {
        let parent = try makeTemporaryDirectory()
        let dir = parent + "/state"
        defer { try? FileManager.default.removeItem(atPath: parent) }
        try run(dir) { p, persistence, _ in
            try p.cookieJar.add(Cookie(domain: "a.test", expires: now + 600, name: "kept", value: "1"))
            try p.cookieJar.add(Cookie(domain: "a.test", name: "session", value: "2"))
            persistence.jarMayHaveChanged(p)
        }
        let text = try String(contentsOfFile: dir + "/cookies-local.txt", encoding: .utf8)
        #expect(text.contains("\tkept\t1"))
        #expect(!text.contains("session"))
        try run(dir) { p, _, _ in
            #expect(p.cookieJar.cookies.map(\.name) == ["kept"])
        }
    }

    /// A change is written by the debounce timer, without waiting for shutdown.
    @Test func aChangeIsSavedWithinTheDebounceInterval() throws {
        let parent = try makeTemporaryDirectory()
        let dir = parent + "/state"
        defer { try? FileManager.default.removeItem(atPath: parent) }
        let path = dir + "/cookies-local.txt"
        try run(dir) { p, persistence, loop in
            try p.cookieJar.add(Cookie(domain: "a.test", expires: now + 600, name: "soon", value: "1"))
            persistence.jarMayHaveChanged(p)
            #expect(!FileManager.default.fileExists(atPath: path))
            let deadline = try EventLoop.Timer(loop: loop)
            var expired = false
            deadline.start(timeout: 5000) { expired = true }
            while !expired, !FileManager.default.fileExists(atPath: path) { loop.runOnce() }
            deadline.close()
            #expect(FileManager.default.fileExists(atPath: path))
        }
    }

    @Test func clearingMemoryKeepsTheStoreAndClearingTheStoreEmptiesIt() throws {
        let parent = try makeTemporaryDirectory()
        let dir = parent + "/state"
        defer { try? FileManager.default.removeItem(atPath: parent) }
        try run(dir) { p, persistence, _ in
            try p.cookieJar.add(Cookie(domain: "a.test", expires: now + 600, name: "old", value: "1"))
            persistence.jarMayHaveChanged(p)
        }
        try run(dir) { p, persistence, _ in
            #expect(p.cookieJar.cookies.map(\.name) == ["old"])
            try persistence.clear(p, includingStore: false)
            #expect(p.cookieJar.cookies.isEmpty)
            // A later change is saved without dropping what memory-only clearing kept.
            try p.cookieJar.add(Cookie(domain: "a.test", expires: now + 600, name: "new", value: "2"))
            persistence.jarMayHaveChanged(p)
        }
        try run(dir) { p, persistence, _ in
            #expect(Set(p.cookieJar.cookies.map(\.name)) == ["old", "new"])
            try persistence.clear(p, includingStore: true)
            #expect(p.cookieJar.cookies.isEmpty)
            // Already empty on disk, before any shutdown.
            let text = try String(contentsOfFile: dir + "/cookies-local.txt", encoding: .utf8)
            #expect(!text.contains("old") && !text.contains("new"))
        }
        try run(dir) { p, _, _ in #expect(p.cookieJar.cookies.isEmpty) }
    }
}
