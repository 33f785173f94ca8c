"""The S3 stand-in really enforces what the publish tests rely on."""

from __future__ import annotations

import boto3
import botocore.exceptions
import pytest
from publish_testbed import REGION, Bucket


def test_s3_server_refuses_a_wrong_secret_key(bucket: Bucket) -> None:
    creds = bucket.server.credentials
    client = boto3.client(
        "s3",
        endpoint_url=bucket.server.url,
        region_name=REGION,
        aws_access_key_id=creds.access_key_id,
        aws_secret_access_key="not-the-secret",
    )
    with pytest.raises(botocore.exceptions.ClientError) as caught:
        client.list_objects_v2(Bucket=bucket.name)
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_s3_server_refuses_an_unknown_access_key(bucket: Bucket) -> None:
    client = boto3.client(
        "s3",
        endpoint_url=bucket.server.url,
        region_name=REGION,
        aws_access_key_id="AKIAUNKNOWN",
        aws_secret_access_key="x",
    )
    with pytest.raises(botocore.exceptions.ClientError) as caught:
        client.put_object(Bucket=bucket.name, Key="k", Body=b"1")
    assert caught.value.response["Error"]["Code"] == "InvalidAccessKeyId"


def test_s3_server_refuses_a_second_if_none_match_put_with_412(bucket: Bucket) -> None:
    client = bucket.client()
    client.put_object(Bucket=bucket.name, Key="k", Body=b"first", IfNoneMatch="*")
    with pytest.raises(botocore.exceptions.ClientError) as caught:
        client.put_object(Bucket=bucket.name, Key="k", Body=b"second", IfNoneMatch="*")
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    body = client.get_object(Bucket=bucket.name, Key="k")["Body"].read()
    assert body == b"first"
