// Microsoft's own client (@azure/storage-blob) against Azurite, for test/azure_test.go: an
// implementation of the Blob API independent of blockfs's. Usage, with the connection string
// in AZ_CONN:
//   node azblob.js mkcontainer NAME
//   node azblob.js get CONTAINER NAME FILE      (the blob's bytes into FILE)
//   node azblob.js put CONTAINER NAME FILE      (FILE's bytes as the blob)
//   node azblob.js list CONTAINER PREFIX        (the names under PREFIX, one a line)
//   node azblob.js flip CONTAINER PREFIX        (every blob under PREFIX again, a byte a third
//                                                of the way in changed: same size, new ETag)
const { BlobServiceClient } = require('@azure/storage-blob');

async function main(cmd, a, b, c) {
  const svc = BlobServiceClient.fromConnectionString(process.env.AZ_CONN);
  const ct = svc.getContainerClient(a);
  switch (cmd) {
    case 'mkcontainer':
      await ct.create();
      return;
    case 'get':
      await ct.getBlobClient(b).downloadToFile(c);
      return;
    case 'put':
      await ct.getBlockBlobClient(b).uploadFile(c);
      return;
    case 'list':
      for await (const blob of ct.listBlobsFlat({ prefix: b })) console.log(blob.name);
      return;
    case 'flip': {
      let n = 0;
      for await (const blob of ct.listBlobsFlat({ prefix: b })) {
        const data = await ct.getBlobClient(blob.name).downloadToBuffer();
        data[Math.floor(data.length / 3)] ^= 0xff;
        await ct.getBlockBlobClient(blob.name).upload(data, data.length);
        n++;
      }
      console.log(n);
      return;
    }
  }
  throw new Error('unknown command ' + cmd);
}

main(...process.argv.slice(2)).catch((e) => {
  console.error(e.message);
  process.exit(1);
});
