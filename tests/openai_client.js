// The npm package openai (installed by make test into build/npm; NODE_PATH points there), used
// as its README shows for speech, against a running attend serve. Usage:
//   NODE_PATH=build/npm/node_modules node tests/openai_client.js http://127.0.0.1:PORT/v1 MODEL SPEECH.wav SPEECH.flac
// Prints one JSON object: what the client made of a transcription (json, srt, verbose_json
// with both timestamp granularities), a translation, and of a text model named as the model
// (the error the client raises).
const fs = require('fs');
const { OpenAI } = require('openai');

async function main() {
  const [baseURL, model, wav, flac] = process.argv.slice(2);
  const client = new OpenAI({ baseURL, apiKey: 'not-checked', maxRetries: 0 });
  const out = {};
  const t = await client.audio.transcriptions.create({ file: fs.createReadStream(wav), model });
  out.text = t.text;
  out.srt = await client.audio.transcriptions.create({
    file: fs.createReadStream(flac),
    model,
    response_format: 'srt',
  });
  out.verbose = await client.audio.transcriptions.create({
    file: fs.createReadStream(wav),
    model,
    language: 'de',
    response_format: 'verbose_json',
    timestamp_granularities: ['word', 'segment'],
  });
  const tr = await client.audio.translations.create({ file: fs.createReadStream(flac), model: 'whisper-1' });
  out.translation = tr.text;
  try {
    await client.audio.transcriptions.create({ file: fs.createReadStream(wav), model: 'tiny-v1' });
    out.refused = 'accepted';
  } catch (err) {
    out.refused = { status: err.status, code: err.code, param: err.param, type: err.type };
  }
  console.log(JSON.stringify(out));
}

main().catch((err) => {
  console.error('openai_client: ' + (err && err.stack ? err.stack : err));
  process.exit(1);
});
