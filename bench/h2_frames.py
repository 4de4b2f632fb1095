#!/usr/bin/env python3
"""HTTP/2 frames on a plaintext gRPC port, counted from a packet capture.

Usage:
  tcpdump -i lo -s 0 -w cap.pcap 'tcp port PORT'   (a few seconds, as root)
  bench/h2_frames.py cap.pcap PORT

Prints, per direction (to or from the server on PORT), each frame type's
count and bytes, the PING and SETTINGS frames split into requests and acks,
the TCP segments that carried data, and the commonest compositions of a
segment (the frames that end in it, in order: "DATA WINDOW_UPDATE x2"),
which show whether one side's frames leave together or one by one. Reads
classic pcap files of the loopback (Linux "cooked" or Ethernet framing) with the standard library
only. A connection's frames are followed across segments; a capture that
starts in the middle of a frame misreads that connection's first bytes
(rare with frames of a few dozen bytes; capture idle connections).
"""
import collections
import struct
import sys

FRAME_TYPES = {0: "DATA", 1: "HEADERS", 2: "PRIORITY", 3: "RST_STREAM", 4: "SETTINGS", 5: "PUSH_PROMISE",
               6: "PING", 7: "GOAWAY", 8: "WINDOW_UPDATE", 9: "CONTINUATION"}
LINK_HEADER = {1: 14, 113: 16, 276: 20, 0: 4}  # Ethernet, Linux cooked v1/v2, BSD loopback
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def packets(path):
    with open(path, "rb") as f:
        header = f.read(24)
        if len(header) < 24:
            raise SystemExit(f"{path}: not a pcap file (too short)")
        magic = struct.unpack("<I", header[:4])[0]
        if magic not in (0xA1B2C3D4, 0xA1B23C4D):
            raise SystemExit(f"{path}: not a little-endian classic pcap file (pcapng is not read; "
                             "capture with tcpdump -w)")
        link = struct.unpack("<I", header[20:24])[0]
        if link not in LINK_HEADER:
            raise SystemExit(f"{path}: link type {link} is not read (capture on the loopback, -i lo)")
        while True:
            record = f.read(16)
            if len(record) < 16:
                return
            length = struct.unpack("<IIII", record)[2]
            yield f.read(length)[LINK_HEADER[link]:]


def shape(names):
    """'DATA WINDOW_UPDATE x2' for DATA, WINDOW_UPDATE, WINDOW_UPDATE; '(a frame continues)' for none."""
    if not names:
        return "(a frame continues)"
    runs = []
    for name in names:
        if runs and runs[-1][0] == name:
            runs[-1][1] += 1
        else:
            runs.append([name, 1])
    return " ".join(name if n == 1 else f"{name} x{n}" for name, n in runs)


def main():
    if len(sys.argv) != 3 or not sys.argv[2].isdigit():
        raise SystemExit(__doc__)
    path, port = sys.argv[1], int(sys.argv[2])
    frames, frame_bytes, segments = collections.Counter(), collections.Counter(), collections.Counter()
    shapes = collections.Counter()  # (direction, the frames that end in one segment)
    pending = collections.defaultdict(bytes)  # per (source, destination) port: bytes of an unfinished frame
    for ip in packets(path):
        if len(ip) < 20 or ip[0] >> 4 != 4 or ip[9] != 6:
            continue  # IPv4 TCP only
        tcp = ip[(ip[0] & 15) * 4:]
        src, dst = struct.unpack(">HH", tcp[:4])
        payload = tcp[(tcp[12] >> 4) * 4:]
        if not payload or port not in (src, dst):
            continue
        direction = "to server" if dst == port else "from server"
        segments[direction] += 1
        buf = pending[(src, dst)] + payload
        if buf.startswith(PREFACE):
            buf = buf[len(PREFACE):]
        ended = []  # the frames that end in this segment
        while len(buf) >= 9:
            length, kind, flags = int.from_bytes(buf[:3], "big"), buf[3], buf[4]
            if len(buf) < 9 + length:
                break
            name = FRAME_TYPES.get(kind, f"type {kind}")
            if kind in (4, 6):
                name += " ack" if flags & 1 else ""
            frames[(direction, name)] += 1
            ended.append(name)
            frame_bytes[(direction, name)] += 9 + length
            buf = buf[9 + length:]
        pending[(src, dst)] = buf
        shapes[(direction, shape(ended))] += 1
    for key in sorted(frames):
        print(f"{key[0]:12s} {key[1]:16s} {frames[key]:9d} frames {frame_bytes[key]:11d} bytes")
    for direction in sorted(segments):
        print(f"{direction:12s} {'TCP segments':16s} {segments[direction]:9d} with data")
    for direction in sorted(segments):
        print(f"segments {direction}, commonest compositions:")
        for (d, composition), count in shapes.most_common():
            if d == direction and count * 100 >= segments[direction]:  # those of 1 % or more
                print(f"  {count:9d} {composition}")


if __name__ == "__main__":
    main()
