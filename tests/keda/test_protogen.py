"""The generated protobuf and gRPC modules: current with the proto, and KEDA's wire contract exactly."""

from __future__ import annotations

from pathlib import Path

from adapter.keda import externalscaler_pb2 as pb
from adapter.keda import protogen


def test_checked_in_code_is_what_the_proto_generates(tmp_path: Path) -> None:
    """Regenerating with grpcio-tools changes no byte of the committed modules (else: run
    `python -m adapter.keda.protogen` and commit)."""
    written = protogen.generate(tmp_path)
    assert [p.name for p in written] == [
        "externalscaler_pb2.py",
        "externalscaler_pb2.pyi",
        "externalscaler_pb2_grpc.py",
    ]
    for fresh, relative in zip(written, protogen.OUTPUTS, strict=True):
        committed = protogen.ROOT / relative
        assert committed.read_bytes() == fresh.read_bytes(), f"{relative} differs from the proto's output"


def test_service_and_messages_are_kedas_exactly() -> None:
    """Package, service, methods (with streaming) and every field name, number and type are KEDA's:
    they are the wire format, so a typo would make KEDA's calls UNIMPLEMENTED or drop fields."""
    file = pb.DESCRIPTOR
    assert file.package == "externalscaler"
    service = file.services_by_name["ExternalScaler"]
    methods = {
        m.name: (m.input_type.name, m.output_type.name, m.server_streaming, m.client_streaming)
        for m in service.methods
    }
    assert methods == {
        "IsActive": ("ScaledObjectRef", "IsActiveResponse", False, False),
        "StreamIsActive": ("ScaledObjectRef", "IsActiveResponse", True, False),
        "GetMetricSpec": ("ScaledObjectRef", "GetMetricSpecResponse", False, False),
        "GetMetrics": ("GetMetricsRequest", "GetMetricsResponse", False, False),
        "StreamMetricSpec": ("ScaledObjectRef", "GetMetricSpecResponse", True, False),
    }
    fields = {
        name: {(f.name, f.number, f.type, f.is_repeated) for f in message.fields}
        for name, message in file.message_types_by_name.items()
    }
    T = pb.DESCRIPTOR.message_types_by_name["MetricSpec"].fields[0]
    string, int64, double, boolean, message = (
        T.TYPE_STRING,
        T.TYPE_INT64,
        T.TYPE_DOUBLE,
        T.TYPE_BOOL,
        T.TYPE_MESSAGE,
    )
    assert fields == {
        "ScaledObjectRef": {
            ("name", 1, string, False),
            ("namespace", 2, string, False),
            ("scalerMetadata", 3, message, True),
        },
        "IsActiveResponse": {("result", 1, boolean, False)},
        "GetMetricSpecResponse": {("metricSpecs", 1, message, True)},
        "MetricSpec": {
            ("metricName", 1, string, False),
            ("targetSize", 2, int64, False),
            ("targetSizeFloat", 3, double, False),
        },
        "GetMetricsRequest": {("scaledObjectRef", 1, message, False), ("metricName", 2, string, False)},
        "GetMetricsResponse": {("metricValues", 1, message, True)},
        "MetricValue": {
            ("metricName", 1, string, False),
            ("metricValue", 2, int64, False),
            ("metricValueFloat", 3, double, False),
        },
    }
    metadata = file.message_types_by_name["ScaledObjectRef"].fields_by_name["scalerMetadata"]
    assert metadata.message_type is not None, "scalerMetadata is a message field (a map's entries)"
    assert metadata.message_type.GetOptions().map_entry, "scalerMetadata is a map<string, string>"
