/// `application/x-www-form-urlencoded`, as browsers write it: unreserved characters as
/// they are, space as `+`, every other byte of the UTF-8 as `%XX`.
enum FormEncoding {
    static func encode(_ pairs: [(key: String, value: String)]) -> String {
        pairs.map { escape($0.key) + "=" + escape($0.value) }.joined(separator: "&")
    }

    static func escape(_ s: String) -> String {
        var out = ""
        out.reserveCapacity(s.utf8.count)
        let hex = Array("0123456789ABCDEF")
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."),
                 UInt8(ascii: "*"):
                out.unicodeScalars.append(UnicodeScalar(b))
            case UInt8(ascii: " "):
                out.append("+")
            default:
                out.append("%")
                out.append(hex[Int(b >> 4)])
                out.append(hex[Int(b & 15)])
            }
        }
        return out
    }
}
